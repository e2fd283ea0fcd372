"""What an encoded image's header declares, read without decoding: sizes, whole JPEGs, bounded walks."""

import io
import struct
import time

import numpy as np
import pytest

from seqtasks.data.image_headers import MAX_JPEG_SEGMENTS, BadImage, check_image, declared_image_size


def _png(width, height):
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I4sII", 13, b"IHDR", width, height) + bytes(5)


def _jpeg(width, height):
    import tensorflow as tf

    return tf.io.encode_jpeg(tf.zeros([height, width, 3], tf.uint8)).numpy()


def _bmp(width, height):
    return b"BM" + bytes(16) + struct.pack("<ii", width, height) + bytes(30)


SEGMENT = b"\xff\xfe\x00\x02"  # an empty comment segment
FRAME = b"\xff\xc0\x00\x11\x08\x00\x02\x00\x03" + bytes(10)  # a baseline frame header of 3 x 2 pixels
SCAN = b"\xff\xda\x00\x08" + bytes(6)  # a start-of-scan header; the image data follows it


def test_declared_image_sizes_are_read_from_headers_without_decoding():
    assert declared_image_size(_png(640, 480)) == (640, 480)
    assert declared_image_size(_jpeg(33, 17)) == (33, 17)
    assert declared_image_size(_bmp(20, -10)) == (20, 10)  # a negative height: rows stored top-down
    assert declared_image_size(_bmp(-7, 5)) == (7, 5)
    assert declared_image_size(b"GIF89a....") is None
    assert declared_image_size(_png(640, 480)[:23]) is None  # too short to hold the size
    assert declared_image_size(_bmp(2, 3)[:25]) is None
    # A PNG encoded by a real encoder, not just our own header.
    from matplotlib import pyplot as plt

    buffer = io.BytesIO()
    plt.imsave(buffer, np.zeros((12, 34, 3)), format="png")
    assert declared_image_size(buffer.getvalue()) == (34, 12)


def test_a_jpeg_s_frame_is_found_past_fill_bytes_and_markers_without_a_length():
    jpeg = _jpeg(5, 7)
    assert declared_image_size(jpeg[:2] + b"\xff" * 100_000 + jpeg[2:]) == (5, 7)
    # Restart and TEM markers have no length field; a walk that read one would miss the frame.
    for marker in (b"\xff\xd0", b"\xff\xd7", b"\xff\x01", b"\xff\xd8"):
        assert declared_image_size(b"\xff\xd8" + marker + FRAME + SCAN) == (3, 2), marker
    # DHT, JPG and DAC share the start-of-frame range but declare no size.
    for marker in (0xC4, 0xC8, 0xCC):
        table = bytes([0xFF, marker, 0x00, 0x08]) + b"\x00\x09\x00\x09\x00\x09"
        assert declared_image_size(b"\xff\xd8" + table + FRAME + SCAN) == (3, 2), hex(marker)
    for marker in (0xC1, 0xC2, 0xCF):  # other frames: extended, progressive, lossless arithmetic
        assert declared_image_size(b"\xff\xd8" + bytes([0xFF, marker]) + FRAME[2:] + SCAN) == (3, 2), hex(marker)
    assert declared_image_size(b"\xff\xd8" + SEGMENT + b"\x00" + FRAME) is None  # not a marker where one must be
    assert declared_image_size(b"\xff\xd8" + b"\xff" * 20) is None
    assert declared_image_size(b"\xff\xd8" + FRAME[:8]) is None  # cut inside the frame header


def test_a_crafted_jpeg_header_is_walked_in_bounded_time():
    # The frame header may be the MAX_JPEG_SEGMENTS-th segment, not the next one.
    assert declared_image_size(b"\xff\xd8" + SEGMENT * (MAX_JPEG_SEGMENTS - 1) + FRAME) == (3, 2)
    with pytest.raises(BadImage, match=f"^a JPEG header of more than {MAX_JPEG_SEGMENTS} segments$"):
        declared_image_size(b"\xff\xd8" + SEGMENT * MAX_JPEG_SEGMENTS + FRAME)
    started = time.perf_counter()
    with pytest.raises(BadImage, match="segments"):
        declared_image_size(b"\xff\xd8" + SEGMENT * 2_000_000)
    fill = b"\xff\xd8" + b"\xff" * 8_000_000 + FRAME[1:]
    assert declared_image_size(fill) == (3, 2)
    assert time.perf_counter() - started < 1.0


def test_a_whole_jpeg_declares_its_frame_starts_its_scan_and_ends():
    jpeg = _jpeg(16, 16)
    check_image(jpeg)
    check_image(jpeg + b"trailing bytes after the image")
    check_image(b"\xff\xd8" + FRAME + SCAN + b"\x12\x34\xff\xd9")
    with pytest.raises(BadImage, match=r"^a truncated JPEG \(its image data does not end\)$"):
        check_image(jpeg[: len(jpeg) // 2])
    with pytest.raises(BadImage, match="a truncated JPEG"):
        check_image(jpeg[:-2])  # only the end-of-image marker missing
    with pytest.raises(BadImage, match="a truncated JPEG"):
        check_image(b"\xff\xd8" + FRAME + b"\xff\xd9" + SCAN + b"\x12\x34")  # an end marker before the scan
    with pytest.raises(BadImage, match="a truncated JPEG"):
        check_image(b"\xff\xd8" + FRAME + b"\xff\xfe\x00\x04\xff\xd9")  # no scan at all
    with pytest.raises(BadImage, match=r"^a JPEG without a frame header$"):
        check_image(b"\xff\xd8\xff\xe0\x00\x04ab")
    with pytest.raises(BadImage, match="a JPEG without a frame header"):
        check_image(b"\xff\xd8" + SCAN + b"\xff\xd9")


@pytest.mark.parametrize("data, reason", [
    (b"", "empty, not an image"),
    (b"GIF89a", "not a decodable image (JPEG, PNG or BMP expected)"),
    (b"\xff\xd8", "not a decodable image (JPEG, PNG or BMP expected)"),
    (b"\x89PNG\r\n", "not a decodable image (JPEG, PNG or BMP expected)"),
])
def test_bytes_that_no_export_decodes_are_named(data, reason):
    with pytest.raises(BadImage) as raised:
        check_image(data)
    assert str(raised.value) == reason


def test_pngs_and_bmps_pass_on_their_signature():
    check_image(_png(1, 1))
    check_image(b"BM")
    check_image(b"\x89PNG\r\n\x1a\n")


def test_a_header_just_long_enough_declares_its_size():
    assert declared_image_size(_png(640, 480)[:24]) == (640, 480)  # signature, IHDR length and type, size
    assert declared_image_size(_bmp(20, -10)[:26]) == (20, 10)
    assert declared_image_size(b"\xff\xd8" + FRAME[:9]) == (3, 2)  # the frame header up to its width


def test_the_largest_declared_sizes_are_not_read_as_negative():
    # A caller refuses too many pixels: a size read as negative would let a decompression bomb through.
    assert declared_image_size(_png(2**32 - 1, 2**31)) == (2**32 - 1, 2**31)
    frame = b"\xff\xc0\x00\x11\x08" + struct.pack(">HH", 40_000, 65_535) + bytes(10)
    assert declared_image_size(b"\xff\xd8" + frame + SCAN) == (65_535, 40_000)


def test_a_jpeg_segment_of_more_than_32_kib_is_stepped_over():
    exif = b"\xff\xe1" + struct.pack(">H", 40_000) + bytes(39_998)  # an APP1 segment, as a camera's EXIF data
    assert declared_image_size(b"\xff\xd8" + exif + FRAME + SCAN) == (3, 2)
    check_image(b"\xff\xd8" + exif + FRAME + SCAN + b"\x12\x34\xff\xd9")


def test_a_jpeg_cut_inside_a_marker_s_length_keeps_the_frame_it_declared():
    # Fill bytes lead to a marker whose length field is cut off: the walk ends there, whatever it found.
    assert declared_image_size(b"\xff\xd8" + FRAME + b"\xff\xff\xff\xfe") == (3, 2)
    assert declared_image_size(b"\xff\xd8\xff\xff\xff\xc0") is None
    with pytest.raises(BadImage, match=r"^a JPEG without a frame header$"):
        check_image(b"\xff\xd8\xff\xff\xff\xc0")


def test_the_segment_bound_counts_a_last_segment_that_ends_the_data():
    assert declared_image_size(b"\xff\xd8" + SEGMENT * MAX_JPEG_SEGMENTS) is None
    with pytest.raises(BadImage, match=f"^a JPEG header of more than {MAX_JPEG_SEGMENTS} segments$"):
        declared_image_size(b"\xff\xd8" + SEGMENT * (MAX_JPEG_SEGMENTS + 1))


def test_only_an_end_marker_after_the_scan_header_ends_a_jpeg():
    # Image data may be empty: the end-of-image marker right after the scan header.
    check_image(b"\xff\xd8" + FRAME + SCAN + b"\xff\xd9")
    truncated = r"^a truncated JPEG \(its image data does not end\)$"
    with pytest.raises(BadImage, match=truncated):  # FF D9 in a comment before the scan
        check_image(b"\xff\xd8" + FRAME + b"\xff\xfe\x00\x04\xff\xd9" + SCAN + b"\x12\x34")
    with pytest.raises(BadImage, match=truncated):  # FF D9 among the scan header's bytes
        check_image(b"\xff\xd8" + FRAME + b"\xff\xda\x00\x08\x00\x00\xff\xd9\x00\x00" + b"\x12\x34")
