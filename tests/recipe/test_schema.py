"""The recipe schema: `spec` and `section`, every field documented, sizes it derives."""

import dataclasses

import pytest


# --- the schema's field helpers, called as the schema calls them ---


def test_spec_of_a_scalar_keeps_its_default_and_doc_and_bounds():
    from seqtasks.recipe.schema import spec

    f = spec(3, "Three.", min=1, max=5)
    assert f.default == 3
    assert f.default_factory is dataclasses.MISSING
    assert dict(f.metadata) == {"doc": "Three.", "min": 1, "max": 5}
    assert dict(spec(None, "Nothing.").metadata) == {"doc": "Nothing."}


@pytest.mark.parametrize("default", [[1, 2], {"a": 1}, []])
def test_spec_of_a_list_or_mapping_gives_each_instance_its_own_copy(default):
    from seqtasks.recipe.schema import spec

    f = spec(default, "Mutable.", min=0)
    assert f.default is dataclasses.MISSING
    first, second = f.default_factory(), f.default_factory()
    assert first == default and type(first) is type(default)
    assert first is not default and first is not second
    assert dict(f.metadata) == {"doc": "Mutable.", "min": 0}


def test_a_dataclass_built_with_spec_and_section():
    from seqtasks.recipe.schema import section, spec

    @dataclasses.dataclass
    class Inner:
        sizes: list = spec([8], "Sizes.")

    @dataclasses.dataclass
    class Outer:
        count: int = spec(2, "Count.", min=1)
        inner: Inner = section(Inner, "The inner section.")

    a, b = Outer(), Outer()
    assert (a.count, a.inner.sizes) == (2, [8])
    a.inner.sizes.append(9)
    assert b.inner.sizes == [8] and a.inner is not b.inner
    inner_field = dataclasses.fields(Outer)[1]
    assert inner_field.default_factory is Inner
    assert dict(inner_field.metadata) == {"doc": "The inner section."}


def test_every_schema_field_is_documented_and_lists_are_not_shared():
    from seqtasks.recipe.schema import DistributeConfig, Recipe
    from seqtasks.tasks.captioning.config import BackboneConfig
    from seqtasks.tasks.sentiment.config import TextClassificationDataConfig

    for cls in (Recipe, BackboneConfig, DistributeConfig, TextClassificationDataConfig):
        for f in dataclasses.fields(cls):
            assert f.metadata.get("doc"), f"{cls.__name__}.{f.name}"
    assert BackboneConfig().filters == [32, 64, 128]
    assert BackboneConfig().filters is not BackboneConfig().filters
    assert DistributeConfig().devices == [] and TextClassificationDataConfig().labels == []


def test_encoder_output_size():
    from seqtasks.recipe.schema import EncoderConfig

    assert EncoderConfig(units=8).output_dim == 8
    assert EncoderConfig(units=8, bidirectional=True).output_dim == 16
    for mode in ("sum", "ave", "mul"):
        assert EncoderConfig(units=8, bidirectional=True, merge_mode=mode).output_dim == 8
    assert EncoderConfig(units=8, merge_mode="concat").output_dim == 8  # one direction: nothing to merge


def test_an_augmentation_share_is_a_documented_fraction_off_by_default():
    from seqtasks.recipe.schema import share

    made = share("Share of pairs lower-cased.")
    assert made.default == 0.0
    assert made.metadata == {"doc": "Share of pairs lower-cased.", "min": 0.0, "max": 1.0}
