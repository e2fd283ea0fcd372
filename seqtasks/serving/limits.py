"""How large a request `seqtasks serve` reads: each bound answers 413 with a message that names it."""

import struct
from dataclasses import dataclass

from seqtasks.tasks.serving_limits import MAX_IMAGE_PIXELS, MAX_TEXT_CHARACTERS


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

    def check_instances(self, count):
        if count > self.max_instances:
            raise TooLarge(f"{count} instances; at most {self.max_instances} per request (--max-instances)")

    def check_text(self, index, text):
        if len(text) > self.max_text_characters:
            raise TooLarge(
                f"instance {index}: {len(text)} characters; at most {self.max_text_characters} (--max-text-characters)"
            )

    def check_image(self, index, data):
        if len(data) > self.max_image_bytes:
            raise TooLarge(f"instance {index}: image of {len(data)} bytes; at most {self.max_image_bytes} (--max-image-bytes)")
        size = declared_image_size(data)
        if size is not None and size[0] * size[1] > self.max_image_pixels:
            raise TooLarge(
                f"instance {index}: image of {size[0]} x {size[1]} pixels; at most {self.max_image_pixels} pixels "
                "(--max-image-pixels)"
            )


def declared_image_size(data):
    """`(width, height)` that a PNG, BMP or JPEG header declares, or None (the model refuses other bytes)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    if data.startswith(b"BM") and len(data) >= 26:
        width, height = struct.unpack("<ii", data[18:26])
        return abs(width), abs(height)
    if data.startswith(b"\xff\xd8"):
        return _jpeg_size(data)
    return None


# Start-of-frame markers: every SOFn but DHT (C4), JPG (C8) and DAC (CC), which share the range.
_JPEG_FRAMES = set(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data):
    position = 2
    while position + 9 <= len(data):
        if data[position] != 0xFF:
            return None
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker in _JPEG_FRAMES:
            height, width = struct.unpack(">HH", data[position + 5 : position + 9])
            return width, height
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            position += 2
            continue
        (length,) = struct.unpack(">H", data[position + 2 : position + 4])
        position += 2 + length
    return None
