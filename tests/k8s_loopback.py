"""A loopback HTTP server that plays the operators' documented states, for the k8s tests.

It answers the few Kubernetes API paths the k8s launcher uses (create, get and delete a custom
object; list a job's pods by label; read a pod's log) on 127.0.0.1 only, answers at most
MAX_REQUESTS requests and is stopped at the end of each test. Each job plays a list of
statuses: each GET returns the next one (the last repeats). The status "interrupt" sends this
process a SIGINT (a Ctrl-C) and answers with the status before it. It proves the client's
requests and state handling, not a cluster: no scheduling, pods, DNS, NCCL or volumes.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from scalebench.k8s import api

MAX_REQUESTS = 400
INTERRUPT = "interrupt"


class LoopbackOperators:
    """statuses: job name -> its status sequence (`default` for any other name); logs: job
    name -> {pod name: log text} (the pods carry the job's `scalebench/run` label)."""

    def __init__(self, statuses: dict[str, list] | None = None, default: list | None = None,
                 logs: dict[str, dict[str, str]] | None = None):
        self.statuses = statuses or {}
        self.default = default if default is not None else [{}]
        self.logs = logs or {}
        self.requests: list[tuple[str, str]] = []
        self.created: dict[str, dict] = {}
        self.deleted: set[str] = set()
        self.gets: dict[str, int] = {}
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, code: int, body, content_type: str = "application/json") -> None:
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self) -> None:
                double.requests.append((self.command, self.path))
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                if len(double.requests) > MAX_REQUESTS:
                    self._answer(503, {"message": "request budget spent"})
                    threading.Thread(target=double.server.shutdown, daemon=True).start()
                    return
                url = urllib.parse.urlsplit(self.path)
                parts = url.path.strip("/").split("/")
                if parts[:2] == ["api", "v1"]:
                    self._core(parts, urllib.parse.parse_qs(url.query))
                else:
                    self._custom(parts, body)

            def _custom(self, parts: list[str], body) -> None:
                # apis/GROUP/VERSION/namespaces/NS/PLURAL[/NAME]
                if self.command == "POST":
                    name = body["metadata"]["name"]
                    if name in double.created and name not in double.deleted:
                        self._answer(409, {"kind": "Status", "reason": "AlreadyExists",
                                           "message": f"{name} already exists"})
                        return
                    double.created[name] = body
                    double.deleted.discard(name)
                    self._answer(201, body)
                    return
                name = parts[-1]
                if name in double.deleted or name not in double.created:
                    self._answer(404, {"kind": "Status", "message": f"{name} not found"})
                elif self.command == "DELETE":
                    double.deleted.add(name)
                    self._answer(200, {"kind": "Status", "status": "Success"})
                else:
                    self._answer(200, {**double.created[name], "status": double.next(name)})

            def _core(self, parts: list[str], query: dict) -> None:
                # api/v1/namespaces/NS/pods, api/v1/namespaces/NS/pods/POD/log
                if parts[-1] == "pods":
                    selector = query.get("labelSelector", [""])[0]
                    job = selector.partition("=")[2]
                    items = [{"metadata": {"name": pod, "labels": {"scalebench/run": job}},
                              "spec": {"containers": [{"name": "main", "image": "x:1"}]}}
                             for pod in double.logs.get(job, {})
                             if job not in double.deleted]
                    self._answer(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {},
                                       "items": items})
                    return
                pod = parts[-2]
                for pods in double.logs.values():
                    if pod in pods:
                        self._answer(200, pods[pod], "text/plain")
                        return
                self._answer(404, {"kind": "Status", "message": f"pod {pod} not found"})

            do_GET = do_POST = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def next(self, name: str) -> dict:
        sequence = self.statuses.get(name, self.default)
        self.gets[name] = self.gets.get(name, 0) + 1
        status = sequence[min(self.gets[name], len(sequence)) - 1]
        if status == INTERRUPT:
            os.kill(os.getpid(), signal.SIGINT)
            earlier = [s for s in sequence[:self.gets[name] - 1] if s != INTERRUPT]
            return earlier[-1] if earlier else {}
        return status

    def __enter__(self) -> LoopbackOperators:
        self.thread.start()
        return self

    def client(self) -> api.Client:
        return api.connect(self.url, timeout=5)

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
