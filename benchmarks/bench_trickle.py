"""CPU per chunk when a stream trickles: one HTTP chunk per network read, as a provider sends tokens.

``bench_stream.py``'s server writes a whole body at once, so each read carries hundreds of chunks
and rxllm's transports hand them to h11 as one (``rxllm/_transports/coalesce.py``). A live provider sends a
token at a time, and then each read carries one chunk: nothing to merge. This script measures
that shape: a server thread writes one chunk per ``send``, ``--gap`` µs apart (slower than the
client reads), and the table shows the client process's CPU time per chunk (``getrusage``: the
server is another process and the gaps are idle), for the floor, rxllm, and rxllm with the
coalescer switched off (to show what it costs when there is nothing to merge).

Run: ``.venv/bin/python benchmarks/bench_trickle.py --chunks 5000 --reps 5``
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _contenders import floor_text, rxllm_runner
from _server import _HEAD, text_body

import rxllm._transports.coalesce


def _chunks(n: int) -> list[bytes]:
    body, chunks, at = text_body(n), [], 0
    while at < len(body):
        size = int(body[at : body.index(b"\r\n", at)], 16)
        end = body.index(b"\r\n", at) + 2 + size + 2
        chunks.append(body[at:end])
        at = end
    return chunks


def _serve(sock: socket.socket, gap: float) -> None:
    while True:
        conn, _ = sock.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            while True:
                head = b""
                while b"\r\n\r\n" not in head:
                    data = conn.recv(65536)
                    if not data:
                        break
                    head += data
                if not head:
                    break
                request_line, _, rest = head.partition(b"\r\n")
                length = next((int(line.split(b":")[1]) for line in rest.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                body = head.partition(b"\r\n\r\n")[2]
                while len(body) < length:
                    body += conn.recv(65536)
                n = int(request_line.split(b" ")[1].split(b"/")[2])
                conn.sendall(_HEAD)
                for chunk in _chunks(n):
                    time.sleep(gap)
                    conn.sendall(chunk)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--gap", type=float, default=100.0, help="µs between the server's writes")
    args = parser.parse_args()
    sock = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = multiprocessing.get_context("fork").Process(target=_serve, args=(sock, args.gap / 1e6), daemon=True)
    server.start()
    received = rxllm._transports.coalesce.ChunkCoalescer.received
    rxllm_run = rxllm_runner("text")

    def rxllm_uncoalesced(url: str, n: int) -> tuple[float, float, int]:
        rxllm._transports.coalesce.ChunkCoalescer.received = lambda self, data: data  # type: ignore[method-assign]
        try:
            return rxllm_run(url, n)
        finally:
            rxllm._transports.coalesce.ChunkCoalescer.received = received  # type: ignore[method-assign]

    contenders = {"floor (httpx iter_lines + json.loads)": floor_text, "rxllm, partials dropped": rxllm_run,
                  "rxllm, coalescer off": rxllm_uncoalesced}
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    for run in contenders.values():
        run(url, 50)
    for _ in range(args.reps):
        for name, run in contenders.items():
            before = _cpu()
            run(url, args.chunks)
            cpu[name].append((_cpu() - before) / args.chunks * 1e6)
    server.terminate()
    floor = statistics.median(cpu["floor (httpx iter_lines + json.loads)"])
    print(f"one chunk per read, {args.chunks} chunks, {args.gap:.0f} µs apart, {args.reps} reps (medians)")
    print(f"{'contender':40s} {'CPU µs/chunk':>13s} {'vs floor':>9s}")
    for name, values in cpu.items():
        median = statistics.median(values)
        print(f"{name:40s} {median:13.2f} {median / floor:8.2f}×")


if __name__ == "__main__":
    main()
