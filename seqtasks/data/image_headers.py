"""What an encoded image's bytes declare, read from its header without decoding it (no TensorFlow).

Exports decode JPEG, PNG and BMP. Before the bytes reach a decoder, callers
learn the declared size (to refuse a decompression bomb) and whether a JPEG
is whole: libjpeg prints `Input file read error` on the process's stderr for
a JPEG cut short, so a truncated one is refused here with a one-line reason.
"""

import re
import struct

# The first bytes of the image files an export reads: JPEG, PNG, BMP.
IMAGE_SIGNATURES = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"BM")
# Start-of-frame markers: every SOFn but DHT (C4), JPG (C8) and DAC (CC), which share the range.
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Segments read before the frame header; real files have a few dozen. More means a crafted header,
# and a bound keeps the walk short whatever the bytes.
MAX_JPEG_SEGMENTS = 1000
_NOT_FILL = re.compile(rb"[^\xff]")


class BadImage(ValueError):
    """Bytes that no export would decode; the message says why in a few words."""


def declared_image_size(data):
    """`(width, height)` that a PNG, BMP or JPEG header declares, or None for other bytes.

    Raises `BadImage` for a JPEG whose header cannot be walked within
    `MAX_JPEG_SEGMENTS` segments.
    """
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    if data.startswith(b"BM") and len(data) >= 26:
        width, height = struct.unpack("<ii", data[18:26])
        return abs(width), abs(height)
    if data.startswith(b"\xff\xd8"):
        return _jpeg_header(data)[0]
    return None


def check_image(data):
    """Raises `BadImage` unless `data` starts as a JPEG, PNG or BMP file does and a JPEG is whole.

    A whole JPEG declares its frame, starts its scan, and has an end-of-image
    marker after the scan starts (bytes after that marker are allowed).
    """
    if not data:
        raise BadImage("empty, not an image")
    if not data.startswith(IMAGE_SIGNATURES):
        raise BadImage("not a decodable image (JPEG, PNG or BMP expected)")
    if data.startswith(b"\xff\xd8"):
        size, scan = _jpeg_header(data)
        if size is None:
            raise BadImage("a JPEG without a frame header")
        if scan is None or data.find(b"\xff\xd9", scan) < 0:
            raise BadImage("a truncated JPEG (its image data does not end)")


def _jpeg_header(data):
    """`((width, height) or None, where the first scan starts or None)` from a JPEG's marker segments."""
    position, segments, size = 2, 0, None
    while position + 4 <= len(data):
        if data[position] != 0xFF:
            return size, None
        fill = _NOT_FILL.search(data, position + 1)  # fill bytes: any run of 0xFF before a marker
        if fill is None:
            break
        position = fill.start() - 1
        marker = data[position + 1]
        segments += 1
        if segments > MAX_JPEG_SEGMENTS:
            raise BadImage(f"a JPEG header of more than {MAX_JPEG_SEGMENTS} segments")
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            position += 2
            continue
        if position + 4 > len(data):
            break
        (length,) = struct.unpack(">H", data[position + 2 : position + 4])
        if marker in _JPEG_FRAMES and size is None and position + 9 <= len(data):
            height, width = struct.unpack(">HH", data[position + 5 : position + 9])
            size = (width, height)
        if marker == 0xDA:  # start of scan: the image data follows its header
            return size, position + 2 + length
        position += 2 + length
    return size, None
