"""Encoded images made byte by byte: a PNG header that declares a size, a BMP of given pixels, a tiny GIF."""

import struct
import zlib


def png_header(width, height):
    """The signature and IHDR chunk of an RGB PNG: enough to declare a size, nothing to decode."""
    fields = b"IHDR" + struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + fields + struct.pack(">I", zlib.crc32(fields))


def bmp_image(pixels):
    """A 24-bit BMP of uint8 RGB `pixels` (rows bottom-up, BGR, each padded to 4 bytes)."""
    height, width, _ = pixels.shape
    row_bytes = (3 * width + 3) // 4 * 4
    rows = b"".join(
        pixels[y, :, ::-1].tobytes() + b"\0" * (row_bytes - 3 * width) for y in range(height - 1, -1, -1)
    )
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(rows), 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 54 + len(rows), 0, 0, 54) + info + rows


# A 1 x 1 GIF, which TensorFlow decodes; the export refuses GIF (its frames' sizes need decoding).
GIF = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
