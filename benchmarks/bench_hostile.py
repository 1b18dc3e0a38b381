"""The transport rows of the attack matrix: hostile servers, redirects, proxies, TLS and secrets,
each against both transports (and a legacy httpx client where it matters), reported row by row.

Every row is a regression test on real loopback sockets in ``tests/faults/``; this runs them in a
subprocess (pytest, JUnit XML) and prints one line per attack: how many cases it has and whether
every one held. Exit status 1 if any row did not hold.

    python benchmarks/bench_hostile.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROWS = {  # test function -> the attack it stands for
    "test_bytes_after_a_response_end_its_connection": "response smuggling on a pooled connection",
    "test_a_clean_response_keeps_its_connection": "control: a clean response keeps its connection",
    "test_a_cross_origin_redirect_arrives_without_any_credential": "cross-origin redirect carries no credential",
    "test_a_redirect_from_https_to_plain_http_is_refused": "redirect https -> http refused",
    "test_a_redirect_loop_ends_at_max_redirects_and_is_not_retried": "redirect loop bounded, not retried",
    "test_rxllms_own_clients_follow_no_redirect": "rxllm's own clients follow no redirect",
    "test_a_key_never_goes_in_clear_to_a_proxy_off_loopback": "no key in clear to a proxy off loopback",
    "test_a_proxy_on_ipv4_mapped_loopback_counts_as_loopback": "IPv4-mapped loopback proxy is loopback",
    "test_one_rule_decides_where_a_key_may_go_in_clear": "one rule for base_url and proxy (spellings)",
    "test_an_illegal_header_value_fails_without_quoting_it": "illegal key characters never quoted",
    "test_the_chained_library_error_holds_no_request": "no request object in the error chain",
    "test_a_web_page_instead_of_an_event_stream_says_so_and_is_not_retried": "HTML 200 named, not retried",
    "test_a_certificate_that_does_not_verify_is_not_retried": "bad certificate not retried",
}
FILES = ["tests/faults/test_faults_smuggling.py", "tests/faults/test_faults_credentials.py",
         "tests/faults/test_faults_permanent.py"]


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", f"--junitxml={report}", *FILES],
                       cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=False)
        cases: dict[str, list[str]] = defaultdict(list)
        for case in ElementTree.parse(report).iter("testcase"):
            name = case.get("name", "").partition("[")[0]
            outcome = "held"
            if case.find("failure") is not None or case.find("error") is not None:
                outcome = "FAILED"
            elif case.find("skipped") is not None:
                outcome = "skipped"
            cases[name].append(outcome)
    print(f"{'attack':<52} {'cases':>5}  result")
    print("-" * 72)
    broken = False
    for name, row in ROWS.items():
        outcomes = cases.get(name, [])
        failed = outcomes.count("FAILED")
        skipped = outcomes.count("skipped")
        result = "held" if outcomes and not failed and not skipped else (
            f"{failed} FAILED" if failed else ("skipped" if skipped else "not run"))
        broken |= result != "held" and result != "skipped"
        print(f"{row:<52} {len(outcomes):>5}  {result}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
