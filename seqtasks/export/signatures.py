"""The names of an export's signatures beside `serving_default`, which every reader of an export asks for."""

SETTINGS_SIGNATURE = "with_settings"
PREFIX_SIGNATURE = "with_prefix"
SCORE_SIGNATURE = "score"
ATTENTION_SIGNATURE = "attention"
