"""Writes shapes/: drawn images of coloured shapes with generated captions, in the Flickr8k layout.

Each 64x64 PNG holds one or two shapes (circle, square, triangle; red, green,
blue, yellow) on a light background; each image gets three captions
that name the shapes, their colours and where they are, so the captioner has
to look at the right place for each word. Written for seqtasks: no third-party
images or text.
Run: python make_shapes_sample.py
"""

import random
from pathlib import Path

import numpy as np
import tensorflow as tf

SIZE = 64
COLOURS = {"red": (210, 40, 40), "green": (40, 160, 60), "blue": (40, 70, 210), "yellow": (225, 200, 40)}
SHAPES = ("circle", "square", "triangle")
QUADRANTS = {"top left": (0, 0), "top right": (1, 0), "bottom left": (0, 1), "bottom right": (1, 1)}
COUNTS = {"train": 300, "dev": 60}


def draw(pixels, shape, colour, cx, cy, radius):
    ys, xs = np.mgrid[0:SIZE, 0:SIZE]
    if shape == "circle":
        inside = (xs - cx) ** 2 + (ys - cy) ** 2 <= radius**2
    elif shape == "square":
        inside = (abs(xs - cx) <= radius * 0.85) & (abs(ys - cy) <= radius * 0.85)
    else:
        top = cy - radius
        inside = (ys >= top) & (ys <= cy + radius) & (abs(xs - cx) <= (ys - top) * 0.6)
    pixels[inside] = COLOURS[colour]


def one_shape(rng, pixels):
    shape, colour = rng.choice(SHAPES), rng.choice(list(COLOURS))
    place = rng.choice(list(QUADRANTS))
    qx, qy = QUADRANTS[place]
    draw(pixels, shape, colour, 16 + 32 * qx + rng.randint(-3, 3), 16 + 32 * qy + rng.randint(-3, 3), rng.randint(8, 11))
    return [
        f"a {colour} {shape} in the {place}",
        f"a {colour} {shape} in the {place} corner",
        f"there is a {colour} {shape} in the {place}",
    ]


def two_shapes(rng, pixels):
    (left_shape, right_shape), (left_colour, right_colour) = rng.sample(SHAPES, 2), rng.sample(list(COLOURS), 2)
    for shape, colour, cx in ((left_shape, left_colour, 16), (right_shape, right_colour, 48)):
        draw(pixels, shape, colour, cx + rng.randint(-3, 3), 32 + rng.randint(-14, 14), rng.randint(8, 11))
    left, right = f"{left_colour} {left_shape}", f"{right_colour} {right_shape}"
    return [
        f"a {left} to the left of a {right}",
        f"a {right} to the right of a {left}",
        f"a {left} and a {right}",
    ]


def main(folder=Path(__file__).resolve().parent / "shapes"):
    rng = random.Random(20261122)
    (folder / "images").mkdir(parents=True, exist_ok=True)
    captions = []
    for split, count in COUNTS.items():
        names = []
        for index in range(count):
            pixels = np.full((SIZE, SIZE, 3), 235, np.uint8)
            texts = one_shape(rng, pixels) if rng.random() < 0.4 else two_shapes(rng, pixels)
            name = f"{split}_{index:03d}.png"
            (folder / "images" / name).write_bytes(tf.io.encode_png(pixels).numpy())
            names.append(name)
            captions += [f"{name}#{k}\t{text}\n" for k, text in enumerate(texts)]
        (folder / f"shapes.{split}Images.txt").write_text("".join(f"{n}\n" for n in names))
    (folder / "shapes.token.txt").write_text("".join(captions))


if __name__ == "__main__":
    main()
