"""`seqtasks serve`: loads the models, then runs the application on uvicorn until SIGINT or SIGTERM.

On either signal uvicorn stops accepting connections and lets the requests
in flight finish (up to `GRACEFUL_SECONDS`) before the process exits.
"""

import socket

from seqtasks.errors import SeqtasksError

GRACEFUL_SECONDS = 30


def serve(path, named, host, port, limits, max_batch_size, batch_timeout_ms, log=print):
    """Serves `path` and the `NAME=PATH`s of `named` on `host:port`; returns when the server has stopped."""
    try:
        import uvicorn

        from seqtasks.serving.app import make_app
    except ImportError as error:
        raise SeqtasksError(f"seqtasks serve needs the extra 'serve': pip install 'seqtasks[serve]' ({error})") from None
    from seqtasks.serving.models import load_served

    _check_port(host, port)
    served = load_served(path, named)
    for model in served.values():
        log(f"Serving {model.name!r} version {model.version} ({model.model.task}) from {model.model.path}")
    app = make_app(served, limits, max_batch_size, batch_timeout_ms)
    shown = f"[{host}]" if ":" in host else host
    log(f"Listening on http://{shown}:{port}/ (the page), TensorFlow Serving's REST API under /v1/models/")
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=GRACEFUL_SECONDS, lifespan="on"
    )
    _graceful_server_class()(config).run()
    log("Stopped")


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
