"""A stand-in for llama-server (its command line, /health and /completion), so the process handling runs
without the real binary: each reply's tokens count up from the prompt's last id, and timings follow the
--spec-type flags."""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

ARGS = sys.argv[1:]
PORT = int(ARGS[ARGS.index("--port") + 1])
N_MAX = int(ARGS[ARGS.index("--spec-draft-n-max") + 1]) if "--spec-draft-n-max" in ARGS else 0
PATCHED = "--spec-draft-n-max" in ARGS and os.environ.get("FAKE_PATCHED") == "1"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def _send(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"status": "ok"})

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        tokens = [request["prompt"][-1] + 1 + i for i in range(request["n_predict"])]
        n_max = min(N_MAX, request.get("speculative.n_max", N_MAX))  # a patched server's per-request block
        accepted = len(tokens) // 2 if n_max else 0  # half the tokens ride on accepted drafts
        timings = {"predicted_ms": 2.0 * (len(tokens) - accepted) * (1 + n_max / 30),
                   "predicted_n": len(tokens)}
        if n_max:
            timings |= {"draft_n": n_max * len(tokens) // 2, "draft_n_accepted": accepted}
        if n_max and PATCHED:  # a step accepting one draft per two tokens
            timings["spec_steps"] = [{"block": n_max + 1, "drafted": n_max, "verified": n_max, "accepted": 1,
                                      "p": [0.5] * n_max}
                                     for _ in range(accepted)]
        self._send({"tokens": tokens, "timings": timings})


print(f"fake llama-server listening on {PORT}", flush=True)
HTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
