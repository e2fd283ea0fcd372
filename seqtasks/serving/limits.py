"""How much `seqtasks serve` reads and how much work it takes on: each bound names its option when it refuses.

`Limits` bound one request (answered 413 over a limit); `Capacity` bounds the
server's work: how many requests wait for a model (503 with `Retry-After`
beyond it), how long one may wait (504), how many are in flight, and how long
a client may take to send its headers and body.
"""

from dataclasses import dataclass

from seqtasks.data.image_headers import BadImage, check_image, declared_image_size
from seqtasks.export.serving_limits import MAX_IMAGE_PIXELS, MAX_TEXT_CHARACTERS


class TooLarge(Exception):
    """A request over one of the `Limits`; the message names the limit and its command-line option."""


@dataclass(frozen=True)
class Limits:
    """The bounds of one request; each field is the `seqtasks serve` option of the same name."""

    max_body_bytes: int = 16 * 1024**2
    max_instances: int = 64
    max_text_characters: int = MAX_TEXT_CHARACTERS
    max_image_bytes: int = 8 * 1024**2
    max_image_pixels: int = MAX_IMAGE_PIXELS

    def as_json(self):
        return dict(self.__dict__)

    def check_instances(self, count, where=None):
        """Over `max_instances` examples, or values of one input (`where`, columnar settings count too)."""
        if count > self.max_instances:
            what = f"{count} instances" if where is None else f"{where}: {count} values"
            raise TooLarge(f"{what}; at most {self.max_instances} per request (--max-instances)")

    def check_text(self, index, text):
        length = len(text.decode("utf-8", "replace") if isinstance(text, bytes) else text)
        if length > self.max_text_characters:
            raise TooLarge(
                f"instance {index}: {length} characters; at most {self.max_text_characters} (--max-text-characters)"
            )

    def check_image(self, index, data):
        """Raises `TooLarge` over a limit, or `BadImage` for bytes no export decodes (`check_image`)."""
        if len(data) > self.max_image_bytes:
            raise TooLarge(f"instance {index}: image of {len(data)} bytes; at most {self.max_image_bytes} (--max-image-bytes)")
        size = declared_image_size(data)
        if size is not None and size[0] * size[1] > self.max_image_pixels:
            raise TooLarge(
                f"instance {index}: image of {size[0]} x {size[1]} pixels; at most {self.max_image_pixels} pixels "
                "(--max-image-pixels)"
            )
        check_image(data)


@dataclass(frozen=True)
class Capacity:
    """The bounds of the server's work; each field is the `seqtasks serve` option of the same name.

    Attributes:
        max_batch_size: most examples in one model call; a request with more
            runs as several calls, taking turns with the other requests
            (back to the end of the queue after each).
        batch_timeout_ms: how long a request waits for others to share its call.
        max_queued: requests waiting for one model; more are answered 503.
        request_timeout_s: longest a request waits for its answer; then 504.
            Also the bound of a model's progress: one that has work and has
            finished no call for longer is stuck (`/healthz` answers 503),
            since no request waiting for it can be answered in time.
        max_concurrent_requests: HTTP requests being handled at once; more are
            answered 503.
        header_timeout_s: how long a connection may take to send a request's
            headers (from its opening, or the end of its last answer); then it
            is closed.
        body_timeout_s: how long a request's body may take; then 408.
        health_timeout_s: how long `/healthz` waits for an idle model to
            answer a one-example request; then 503 (a busy model is judged by
            its progress, without waiting).
    """

    max_batch_size: int = 32
    batch_timeout_ms: float = 5.0
    max_queued: int = 64
    request_timeout_s: float = 30.0
    max_concurrent_requests: int = 128
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    health_timeout_s: float = 5.0


__all__ = ["BadImage", "Capacity", "Limits", "TooLarge", "declared_image_size"]
