"""The attack matrix: hostile servers x both transports x three wire formats, redirects, proxies,
TLS, secrets, tools, stores and load, reported row by row, then the memory attacks' peak RSS.

Every row is a regression test on real parts (loopback servers, a real PostgreSQL where one is
installed, real child processes) in ``tests/``; this runs them in a subprocess (pytest, JUnit
XML) and prints one line per attack: how many cases it has (a case is one transport, wire
format, client library or cut mode) and whether every one held. Then each memory attack runs in
a child process of its own, once per transport, next to a plain call in the same run, and its peak
RSS (``VmHWM``) is printed. Exit status 1 if any row did not hold.

    python benchmarks/bench_hostile.py            # everything (about 3 minutes on 2 cores)
    python benchmarks/bench_hostile.py --only rows
    python benchmarks/bench_hostile.py --only memory
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
F = "tests/faults/"

# (category, file, test function, the attack it stands for)
ROWS: list[tuple[str, str, str, str]] = [
    # --- hostile servers (both transports; most rows x the three wire formats) ---
    ("server", F + "test_faults_cuts.py", "test_server_dies_at_random_offsets",
     "cut at ~60 offsets x reset/FIN x chunked/close (x3 wires)"),
    ("server", F + "test_faults_cuts.py", "test_non_streamed_answer_cut_at_random_offsets",
     "non-streamed answer cut at random offsets (x3 wires)"),
    ("server", F + "test_faults_finish_grace.py",
     "test_a_stall_after_the_finish_and_usage_ends_the_turn_after_the_grace",
     "stall after finish+usage: whole final after the grace (x3)"),
    ("server", F + "test_faults_finish_grace.py", "test_a_cut_after_the_finish_and_usage_keeps_the_whole_turn",
     "cut after finish+usage, no end marker: whole final (x3)"),
    ("server", F + "test_faults_finish_grace.py", "test_a_stall_after_the_finish_but_before_the_usage_still_times_out",
     "control: stall before the usage is a read timeout"),
    ("server", F + "test_faults_smuggling.py", "test_bytes_after_a_response_end_its_connection",
     "response smuggling on a pooled connection"),
    ("server", F + "test_faults_smuggling.py", "test_a_clean_response_keeps_its_connection",
     "control: a clean response keeps its connection"),
    ("server", F + "test_faults_garbage.py", "test_mutated_bodies_through_the_live_model_fail_only_with_rxllm_errors",
     "mutated bodies: only rxllm errors (x3 wires)"),
    ("server", F + "test_faults_garbage.py", "test_every_parser_on_random_bytes_raises_only_rxllm_errors",
     "random bytes into every parser"),
    ("server", F + "test_faults_long_line.py", "test_an_endless_line_fails_at_a_lower_cap_for_every_provider",
     "endless line: the line cap (x3 wires)"),
    ("server", F + "test_faults_event_size.py", "test_many_short_data_lines_fail_at_the_event_cap_over_a_real_socket",
     "one event of many short data lines: the event cap (x3)"),
    ("server", F + "test_faults_limits.py", "test_a_double_gzip_bomb_fails_at_the_line_cap_as_bytes_are_produced",
     "gzip, gzip bomb: the line cap as bytes are produced"),
    ("server", F + "test_faults_limits.py",
     "test_a_non_streamed_body_past_max_response_bytes_is_a_typed_error_not_retried",
     "non-streamed body past max_response_bytes"),
    ("server", F + "test_faults_limits.py", "test_compressed_comments_count_toward_the_stream_cap_and_are_not_retried",
     "compressed comments count toward the stream cap"),
    ("server", F + "test_faults_limits.py", "test_an_encoding_rxllm_does_not_decode_is_a_protocol_error_not_retried",
     "unknown content-encoding: ProtocolError, not retried"),
    ("server", F + "test_faults_limits.py", "test_a_one_byte_trickle_is_cut_by_the_total_timeout_and_not_retried",
     "one-byte trickle: total_timeout"),
    ("server", F + "test_faults_limits.py", "test_silence_after_the_headers_is_the_read_timeout_and_is_not_retried",
     "silence after the headers: read_timeout"),
    ("server", F + "test_faults_limits.py", "test_no_headers_is_the_first_byte_timeout_distinct_from_the_read_timeout",
     "no headers: first_byte_timeout"),
    ("server", F + "test_faults_permanent.py", "test_a_web_page_instead_of_an_event_stream_says_so_and_is_not_retried",
     "HTML 200 named, not retried"),
    ("server", F + "test_faults_permanent.py", "test_response_headers_too_large_are_not_retried",
     "response headers too large, not retried"),
    ("server", F + "test_faults_body_errors.py", "test_a_body_that_breaks_off_chains_no_request",
     "body broken off: typed error, no request chained"),
    ("server", F + "test_faults_body_errors.py", "test_an_error_from_below_httpx_is_mapped",
     "OSError / httpcore error from below httpx: mapped"),
    ("server", F + "test_faults_retry_storm.py", "test_an_endless_storm_makes_exactly_max_attempts_requests",
     "endless 429 storm: exactly max_attempts requests"),
    ("server", F + "test_faults_slow_consumer.py", "test_a_blocked_subscriber_throttles_the_reader_of_a_50_mb_stream",
     "blocked subscriber throttles a 50 MB stream (TCP)"),
    # --- redirects ---
    ("redirect", F + "test_faults_credentials.py", "test_a_cross_origin_redirect_arrives_without_any_credential",
     "cross-origin redirect carries no credential"),
    ("redirect", F + "test_faults_credentials.py", "test_a_redirect_from_https_to_plain_http_is_refused",
     "redirect https -> http refused"),
    ("redirect", F + "test_faults_credentials.py", "test_a_redirect_loop_ends_at_max_redirects_and_is_not_retried",
     "redirect loop bounded, not retried"),
    ("redirect", F + "test_faults_credentials.py", "test_rxllms_own_clients_follow_no_redirect",
     "rxllm's own clients follow no redirect"),
    # --- proxies ---
    ("proxy", F + "test_faults_credentials.py", "test_a_key_never_goes_in_clear_to_a_proxy_off_loopback",
     "no key in clear to a proxy off loopback"),
    ("proxy", F + "test_faults_credentials.py", "test_a_proxy_on_ipv4_mapped_loopback_counts_as_loopback",
     "IPv4-mapped loopback proxy is loopback"),
    ("proxy", F + "test_faults_credentials.py", "test_one_rule_decides_where_a_key_may_go_in_clear",
     "one rule for base_url and proxy (spellings)"),
    ("proxy", F + "test_faults_httpx_ecosystem.py", "test_both_transports_honour_http_proxy_and_no_proxy_like_httpx",
     "HTTP_PROXY / NO_PROXY honoured like httpx"),
    ("proxy", F + "test_faults_httpx_ecosystem.py",
     "test_dispose_mid_body_through_a_proxy_closes_the_upstream_connection",
     "dispose through a proxy closes the upstream"),
    # --- TLS ---
    ("tls", F + "test_faults_permanent.py", "test_a_certificate_that_does_not_verify_is_not_retried",
     "bad certificate not retried"),
    ("tls", F + "test_faults_tls_env.py", "test_without_ssl_cert_file_the_private_ca_fails_verification",
     "a private CA does not verify by default"),
    ("tls", F + "test_faults_tls_env.py", "test_ssl_cert_file_lets_a_private_ca_verify_on_both_transports",
     "SSL_CERT_FILE trusts a private CA"),
    # --- secrets ---
    ("secrets", F + "test_faults_credentials.py", "test_an_illegal_header_value_fails_without_quoting_it",
     "illegal key characters never quoted"),
    ("secrets", F + "test_faults_credentials.py", "test_the_chained_library_error_holds_no_request",
     "no request object in the error chain"),
    ("secrets", F + "test_faults_secrets.py",
     "test_a_key_echoed_in_an_error_body_never_reaches_the_message_or_the_logs",
     "a key echoed in an error body: redacted"),
    ("secrets", F + "test_faults_redaction_paths.py",
     "test_an_in_band_error_quoting_the_key_is_redacted_on_the_final_the_events_and_the_stored_rows",
     "in-band error quoting the key: final, events, rows"),
    ("secrets", F + "test_faults_redaction_paths.py",
     "test_the_attempt_spans_status_description_is_redacted_when_it_is_written",
     "span status description redacted"),
    ("secrets", F + "test_faults_redaction_paths.py", "test_log_records_of_rxllm_and_the_http_libraries_are_redacted",
     "log records (rxllm, httpx, httpcore) redacted"),
    ("secrets", F + "test_faults_redaction_paths.py", "test_rxllm_chat_prints_the_in_band_error_without_the_key",
     "rxllm chat output redacted"),
    ("secrets", F + "test_faults_redaction_paths.py",
     "test_a_key_read_from_a_file_keeps_no_newline_and_is_sent_stripped",
     "a key with its file's newline: stripped"),
    ("secrets", F + "test_faults_extra_secrets.py", "test_extra_header_and_body_credentials_are_redacted_like_the_key",
     "extra header / extra_body credentials redacted"),
    ("secrets", F + "test_faults_extra_secrets.py", "test_a_live_models_extra_header_credential_is_known_to_redaction",
     "a live model's extra header credential redacted"),
    ("secrets", F + "test_faults_secrets.py", "test_a_key_is_not_sent_in_clear_text_to_a_remote_host",
     "no key in clear text to a remote host"),
    # --- tools ---
    ("tools", "tests/agents/test_agents_tool_base_exceptions.py",
     "test_a_base_exception_in_a_tool_is_an_error_result_and_the_session_goes_on",
     "a tool raising SystemExit / BaseException"),
    ("tools", "tests/agents/test_agents_tool_base_exceptions.py",
     "test_a_keyboard_interrupt_in_a_tool_fails_the_run_and_releases_the_lane",
     "KeyboardInterrupt in a tool releases the lane"),
    ("tools", "tests/agents/test_agents_hostile_tool_io.py",
     "test_a_result_past_the_cap_is_an_error_result_stored_and_sent_instead",
     "a tool result past the cap"),
    ("tools", "tests/agents/test_agents_hostile_tool_io.py",
     "test_non_finite_numbers_in_tool_arguments_are_malformed_and_never_reach_the_tool",
     "NaN / Infinity in tool arguments"),
    ("tools", "tests/providers/test_usage_rule.py", "test_a_bad_usage_figure_is_dropped_and_logged_and_the_answer_kept",
     "bogus usage figures: dropped, answer kept"),
    # --- stores and user input ---
    ("stores", "tests/sessions/test_session_lone_surrogates.py",
     "test_a_user_message_with_lone_surrogates_is_stored_and_sent_with_replacement_characters",
     "lone surrogates in a user message"),
    ("stores", "tests/sessions/test_session_lone_surrogates.py",
     "test_a_session_already_holding_a_lone_surrogate_can_be_read_and_continued",
     "a poisoned session can be read and continued"),
    ("stores", "tests/sessions/test_session_store_bounds.py",
     "test_a_frozen_postgres_fails_calls_with_store_error_and_the_next_call_after_sigcont_works",
     "a frozen PostgreSQL (SIGSTOP): bounded StoreError"),
    ("stores", "tests/sessions/test_session_store_bounds.py",
     "test_a_read_only_sqlite_file_is_readable_by_a_process_that_may_not_write_it",
     "a read-only SQLite file reads"),
    ("stores", "tests/sessions/test_artifact_names_and_links.py",
     "test_every_name_within_255_utf8_bytes_is_saved_listed_loaded_and_deleted",
     "artifact names up to 255 UTF-8 bytes fit"),
    ("stores", "tests/sessions/test_artifact_names_and_links.py", "test_symlinks_inside_the_root_are_refused",
     "symlinks planted in the artifact root refused"),
    # --- load ---
    ("load", F + "test_faults_cycles.py",
     "test_many_subscribe_dispose_cycles_leak_nothing_and_emit_nothing_after_dispose",
     "subscribe/dispose cycles leak nothing"),
    ("load", F + "test_faults_cycles.py", "test_a_burst_of_disposed_requests_leaves_the_pool_usable",
     "a burst of disposed requests leaves the pool usable"),
    ("load", F + "test_faults_dispose_writes.py", "test_nothing_reaches_the_server_after_dispose_returns",
     "nothing written after dispose returns"),
    ("load", F + "test_faults_idle_threads.py", "test_idle_io_threads_exit_after_a_burst",
     "idle I/O threads exit after a burst"),
    ("load", F + "test_faults_retry_pool.py",
     "test_an_async_retry_is_sent_at_its_timer_while_100_pooled_connections_are_busy",
     "a retry on time while 100 connections are busy"),
]

# --- memory attacks: each in a child process of its own; the peak RSS is its VmHWM -----------------
_CHILD = textwrap.dedent(
    """
    import gzip, json, sys, zlib
    sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests", sys.argv[1] + "/tests/faults"]
    from faults_support import REQUEST, Recorder
    from wire import OPENAI
    from rxllm import AsyncHttpTransport, HttpTransport, RetryPolicy
    from rxllm.testing import StubResponse, StubServer, ToolCallScript, sse_turn

    kind, attack = sys.argv[2], sys.argv[3]
    MB = 1024 * 1024

    def gzipped(unit, times):
        compressor = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        return b"".join(compressor.compress(unit) for _ in range(times)) + compressor.flush()

    stream, sse = True, {"content-type": "text/event-stream"}
    if attack == "baseline":
        response = StubResponse(body=OPENAI.stream("a plain answer"))
    elif attack == "event":  # one event of ~512 MiB of short data lines, never ended
        response = StubResponse(body=[gzipped(b"data: ab\\n" * (MB // 9), 512)],
                                headers={**sse, "content-encoding": "gzip"})
    elif attack == "line":  # one 512 MiB line, gzip inside gzip
        response = StubResponse(body=[gzip.compress(gzipped(b"x" * MB, 512))],
                                headers={**sse, "content-encoding": "gzip, gzip"})
    elif attack == "whole":  # a non-streamed 512 MiB JSON body
        stream = False
        response = StubResponse(body=[gzipped(b'{"a": "' + b"y" * (MB - 9) + b'",', 512)], chunked=False,
                                headers={"content-type": "application/json", "content-encoding": "gzip"})
    elif attack == "tool-calls":  # 100,000 tool calls in one turn (no cap: they aggregate)
        calls = [ToolCallScript(f"c{i}", "f", ['{"i": ', str(i) + "}"]) for i in range(100_000)]
        response = StubResponse(body=sse_turn("openai-chat", text=(), tool_calls=calls))
    else:
        raise SystemExit(f"unknown attack {attack}")
    wire_bytes = sum(len(b) for b in response.body if isinstance(b, bytes))
    transport = (HttpTransport if kind == "threads" else AsyncHttpTransport)(max_concurrent_streams=2)
    with StubServer([response]) as server:
        recorder = Recorder()
        model = OPENAI.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
        recorder.subscribe(model.generate_content(REQUEST, stream=stream))
        recorder.wait(attack, timeout=300)
    transport.close()
    with open("/proc/self/status") as status:
        hwm = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    if recorder.errors:
        outcome = type(recorder.errors[0]).__name__
    else:
        outcome = f"{len(recorder.items[-1].function_calls())}-calls" if attack == "tool-calls" else "answer"
    print(outcome, wire_bytes, hwm // 1024)
    """
)
# attack -> (what it is, the outcome that holds, a generous peak RSS bound in MB)
MEMORY = {
    "baseline": ("a plain call (the baseline)", "answer", 200),
    "event": ("1 MB gzip: one 512 MiB event of data lines", "EventTooLargeError", 200),
    "line": ("gzip, gzip: one 512 MiB line", "LineTooLongError", 200),
    "whole": ("non-streamed 512 MiB JSON body (gzip)", "ResponseTooLargeError", 200),
    "tool-calls": ("100,000 tool calls in one turn", "100000-calls", 1500),
}


def run_rows() -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        selection = sorted({f"{file}::{test}" for _, file, test, _ in ROWS})
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", f"--junitxml={report}",
                        *selection], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=False)
        cases: dict[tuple[str, str], list[str]] = defaultdict(list)
        failures: list[str] = []
        for case in ElementTree.parse(report).iter("testcase"):
            name = case.get("name", "").partition("[")[0]
            module = case.get("classname", "").rpartition(".")[2]
            outcome = "held"
            failure = case.find("failure") if case.find("failure") is not None else case.find("error")
            if failure is not None:
                outcome = "FAILED"
                failures.append(f"{module}::{case.get('name')}: {failure.get('message', '')[:300]}")
            elif case.find("skipped") is not None:
                outcome = "skipped"
            cases[(module, name)].append(outcome)
    print("| category | attack | cases | result |\n| --- | --- | --- | --- |")
    broken = False
    total = held = 0
    for category, file, test, label in ROWS:
        outcomes = cases.get((Path(file).stem, test), [])
        failed = outcomes.count("FAILED")
        skipped = outcomes.count("skipped")
        result = "held" if outcomes and not failed and not skipped else (
            f"{failed} FAILED" if failed else ("skipped" if skipped else "not run"))
        broken |= result not in ("held", "skipped")
        total += len(outcomes)
        held += outcomes.count("held")
        print(f"| {category} | {label} | {len(outcomes)} | {result} |")
    print(f"\n{held} of {total} cases held across {len(ROWS)} rows")
    for line in failures:
        print(f"FAILED {line}", file=sys.stderr)
    return not broken


def run_memory() -> bool:
    print("\n| memory attack | transport | outcome | on the wire | peak RSS | result |")
    print("| --- | --- | --- | --- | --- | --- |")
    ok = True
    for attack, (label, expected, bound) in MEMORY.items():
        for kind in ("threads", "asyncio"):
            result = subprocess.run([sys.executable, "-c", _CHILD, str(ROOT), kind, attack], capture_output=True,
                                    text=True, timeout=600, check=False, env=dict(os.environ, PYTHONPATH=str(ROOT)))
            if result.returncode != 0:
                print(f"| {label} | {kind} | child failed | | | FAILED |")
                print(result.stderr[-2000:], file=sys.stderr)
                ok = False
                continue
            outcome, wire_bytes, peak_mb = result.stdout.split()[-3:]
            holds = outcome == expected and int(peak_mb) < bound
            ok &= holds
            size = int(wire_bytes)
            shown = f"{size / 1e6:.2f} MB" if size >= 100_000 else f"{size / 1e3:.1f} kB"
            print(f"| {label} | {kind} | {outcome} | {shown} | {peak_mb} MB | "
                  f"{'held' if holds else 'FAILED'} |")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("rows", "memory"))
    args = parser.parse_args()
    ok = True
    if args.only in (None, "rows"):
        ok &= run_rows()
    if args.only in (None, "memory"):
        ok &= run_memory()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
