"""Serving the explorer: a threaded WSGI server (Werkzeug, Flask's own) in the foreground or a thread."""

from __future__ import annotations

import errno
import threading
from typing import Any, Optional

from captum_prxai.exceptions import PRXAIError

__all__ = ["ServerThread", "make_server"]


def _quiet_handler() -> Any:
    """Werkzeug's request handler without its line per request (a notebook would print them into the cell)."""
    from werkzeug.serving import WSGIRequestHandler

    class QuietHandler(WSGIRequestHandler):
        def log_request(self, code: Any = "-", size: Any = "-") -> None:
            return None

    return QuietHandler


def make_server(app: Any, host: str = "127.0.0.1", port: int = 8765) -> Any:
    """A threaded Werkzeug WSGI server for ``app`` bound to ``host:port`` (``port=0``: a free port).

    Requests are not logged one line each (the page polls); errors still are.

    Raises:
        PRXAIError: The port is taken or the address cannot be bound.
    """
    from werkzeug.serving import make_server as _make

    try:
        return _make(host, int(port), app, threaded=True, request_handler=_quiet_handler())
    except OSError as err:
        if err.errno == errno.EADDRINUSE or "in use" in str(err).lower():
            raise PRXAIError(f"port {port} on {host} is already in use; pick another with --port "
                             "(or --port 0 for any free port).") from None
        raise PRXAIError(f"cannot listen on {host}:{port}: {err.strerror or err}.") from None
    except SystemExit:  # werkzeug exits when the port is taken on some versions
        raise PRXAIError(f"port {port} on {host} is already in use; pick another with --port.") from None


class ServerThread:
    """Run the explorer in a background thread (tests, notebooks).

    Example::

        server = ServerThread(create_app(model, tokenizer), port=0).start()
        print(server.url)
        ...
        server.stop()
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        self.server = make_server(app, host, port)
        self.host = host
        self.port = int(self.server.server_port)
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> "ServerThread":
        self._thread = threading.Thread(target=self.server.serve_forever, name="prxai-explorer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "ServerThread":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
