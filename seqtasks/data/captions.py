"""Image captions: the Flickr8k/Flickr30k token file with split lists, and COCO captions JSON.

Every reader returns `{image file name: [caption, ...]}` in file order and
raises `SeqtasksError` naming the file (and line) for anything malformed.
"""

import json
from pathlib import Path

from seqtasks.data.text_files import numbered_lines, read_data_bytes, reading
from seqtasks.errors import SeqtasksError


def read_flickr_tokens(path, encoding="utf-8"):
    """Lines `<image>#<n><TAB><caption>` (plain or gzip) -> captions by image.

    A name with a suffix after the image's extension (the original file's
    `...jpg.1#0` quirk) keeps its own key, so it matches no image of a split.
    """
    path = Path(path)
    captions = {}
    with reading(path, encoding):
        for number, line in numbered_lines(path, encoding):
            if not line.strip():
                continue
            key, tab, caption = line.partition("\t")
            image, hash_sign, index = key.rpartition("#")
            if not tab or not hash_sign or not index.isdigit():
                raise SeqtasksError(f"{path}:{number}: expected '<image>#<n><TAB><caption>'")
            if not caption.strip():
                raise SeqtasksError(f"{path}:{number}: empty caption")
            captions.setdefault(image.strip(), []).append(caption.strip())
    if not captions:
        raise SeqtasksError(f"{path}: no captions in the file")
    return captions


def read_split_list(path):
    """One image file name per line (Flickr_8k.trainImages.txt), blank lines skipped."""
    path = Path(path)
    with reading(path):
        names = [line.strip() for _, line in numbered_lines(path) if line.strip()]
    if not names:
        raise SeqtasksError(f"{path}: no image names in the file")
    return names


def select_split(captions, names, captions_path, split_path):
    """Captions of the images a split list names, in the list's order; every one must have captions."""
    missing = [name for name in names if name not in captions]
    if missing:
        raise SeqtasksError(
            f"{split_path}: {len(missing)} image(s) without captions in {captions_path}, e.g. {missing[0]!r}"
        )
    return {name: captions[name] for name in names}


def read_coco_captions(path):
    """COCO captions JSON, plain or gzip.

    `images` with `id` and `file_name`, `annotations` with `image_id` and `caption`.
    """
    path = Path(path)
    with reading(path):
        try:
            data = json.loads(read_data_bytes(path).decode("utf-8"))
        except json.JSONDecodeError as error:
            raise SeqtasksError(f"{path}:{error.lineno}: invalid JSON: {error.msg}") from None
        except UnicodeDecodeError as error:
            raise SeqtasksError(f"{path}: not valid utf-8 (byte {error.start + 1})") from None
    if not isinstance(data, dict) or not isinstance(data.get("images"), list) or not isinstance(
        data.get("annotations"), list
    ):
        raise SeqtasksError(f"{path}: expected a JSON object with 'images' and 'annotations' lists")
    files = {}
    for index, image in enumerate(data["images"]):
        if not isinstance(image, dict) or "id" not in image or not isinstance(image.get("file_name"), str):
            raise SeqtasksError(f"{path}: images[{index}]: expected an object with 'id' and 'file_name'")
        files[image["id"]] = image["file_name"]
    captions = {}
    for index, annotation in enumerate(data["annotations"]):
        if not isinstance(annotation, dict) or not isinstance(annotation.get("caption"), str):
            raise SeqtasksError(f"{path}: annotations[{index}]: expected an object with 'image_id' and 'caption'")
        if annotation.get("image_id") not in files:
            raise SeqtasksError(
                f"{path}: annotations[{index}]: image_id {annotation.get('image_id')!r} is not in 'images'"
            )
        if annotation["caption"].strip():
            captions.setdefault(files[annotation["image_id"]], []).append(annotation["caption"].strip())
    if not captions:
        raise SeqtasksError(f"{path}: no captions in the file")
    return captions
