"""`seqtasks serve`: loads the models, then runs the application on uvicorn until SIGINT or SIGTERM.

On either signal uvicorn stops accepting connections and lets the requests
in flight finish (up to `GRACEFUL_SECONDS`) before the process exits. A
connection that has not sent a request's headers within
`Capacity.header_timeout_s` of opening (or of its last answer) is closed, so
slow clients cannot hold connections.
"""

import socket

from seqtasks.errors import SeqtasksError

GRACEFUL_SECONDS = 30
KEEP_ALIVE_SECONDS = 5


def serve(path, named, host, port, limits, capacity, allowed_hosts=(), log_batches=False, log=print):
    """Serves `path` and the `NAME=PATH`s of `named` on `host:port`; returns when the server has stopped."""
    try:
        import uvicorn

        from seqtasks.serving.app import LOCAL_HOSTS, make_app
    except ImportError as error:
        raise SeqtasksError(f"seqtasks serve needs the extra 'serve': pip install 'seqtasks[serve]' ({error})") from None
    from seqtasks.serving.models import load_served

    _check_port(host, port)
    served = load_served(path, named)
    for model in served.values():
        log(f"Serving {model.name!r} version {model.version} ({model.model.task}) from {model.model.path}")
    hosts = (host, *allowed_hosts)
    app = make_app(served, limits, capacity, hosts, log=log, log_batches=log_batches)
    shown = f"[{host}]" if ":" in host else host
    log(f"Listening on http://{shown}:{port}/ (the page), TensorFlow Serving's REST API under /v1/models/")
    names = sorted(set(LOCAL_HOSTS) | {name.lower() for name in hosts})
    log(f"Requests must name one of these hosts: {', '.join(names)} (--allowed-host adds one)")
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=GRACEFUL_SECONDS,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        lifespan="on",
        http=header_deadline_protocol(capacity.header_timeout_s),
    )
    _graceful_server_class()(config).run()
    log("Stopped")


def header_deadline_protocol(seconds):
    """uvicorn's HTTP/1.1 protocol, closing a connection that has not sent a request's headers in `seconds`.

    uvicorn bounds the idle time after an answer (keep-alive) but not a
    client that sends its headers a byte at a time; this adds that bound.
    """
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderDeadlineProtocol(H11Protocol):
        _header_deadline = None

        def connection_made(self, transport):
            super().connection_made(transport)
            self._arm_header_deadline()

        def on_response_complete(self):
            super().on_response_complete()
            self._arm_header_deadline()

        def connection_lost(self, exc):
            if self._header_deadline is not None:
                self._header_deadline.cancel()
            super().connection_lost(exc)

        def _arm_header_deadline(self):
            if self._header_deadline is not None:
                self._header_deadline.cancel()
            self._header_deadline = self.loop.call_later(seconds, self._header_deadline_passed)

        def _header_deadline_passed(self):
            waiting = self.cycle is None or self.cycle.response_complete  # no request's headers yet
            if waiting and not self.transport.is_closing():
                self.transport.close()

    return HeaderDeadlineProtocol


def _graceful_server_class():
    import uvicorn

    class GracefulServer(uvicorn.Server):
        def handle_exit(self, sig, frame):
            super().handle_exit(sig, frame)
            # uvicorn raises the signal again once it has shut down, which ends the process with
            # status -15; a graceful stop on request is a normal exit here (status 0, "Stopped").
            getattr(self, "_captured_signals", []).clear()

    return GracefulServer


def _check_port(host, port):
    """A clear error for a port in use or a host that is not this machine's, before the models load."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise SeqtasksError(f"cannot listen on {host}:{port}: {error.strerror}") from None
