"""The Catalog page through AppTest: browse, add a custom entry, use it in the Explorer."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")


def open_catalog(lang: str = "en") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    if lang != "en":
        at.query_params["lang"] = lang
    at.switch_page("pages/catalog.py").run()
    assert not at.exception
    return at


def test_catalog_lists_models_and_gpus_with_sources(custom: Path) -> None:
    at = open_catalog()
    assert at.title[0].value == "Catalog: models and GPUs"
    models, gpus = at.dataframe[0].value, at.dataframe[1].value
    qwen = models[models["key"] == "qwen3.5-9b"].iloc[0]
    assert qwen["layers by kind"] == "8 full + 24 linear"
    assert qwen["KV KiB/token fp16"] == 32 and qwen["KV KiB/token fp8"] == 16
    assert "awq 5.7*" in qwen["weights GB by format"]
    g = gpus[gpus["key"] == "rtx-4090"].iloc[0]
    assert g["bandwidth (GB/s)"] == 1008 and g["BF16 dense TFLOP/s"] == 165.2
    h100 = gpus[gpus["key"] == "h100-sxm"].iloc[0]   # data/matmul_ceilings.toml beside the spec
    assert h100["BF16 measured matmul TFLOP/s"] == 794.5
    assert h100["FP8 measured matmul TFLOP/s"] == 1402.6
    assert models["source"].str.len().min() > 0 and gpus["as of"].str.len().min() > 0


def fill_model_form(at: AppTest, key: str) -> None:
    at.text_input(key="cm_key").set_value(key)
    at.text_input(key="cm_name").set_value("My 7B")
    at.text_input(key="cm_source").set_value("my config.json")


@pytest.mark.slow
def test_a_custom_model_is_saved_and_usable_in_the_explorer(custom: Path) -> None:
    at = open_catalog()
    fill_model_form(at, "my-model-7b")
    at.selectbox(key="cm_tied").set_value("separate")
    at.button[0].click().run()
    assert not at.exception and not at.error
    assert "Saved model 'my-model-7b'" in at.success[0].value
    assert (custom / "models" / "my-model-7b.toml").exists()
    assert "tied_embeddings = false" in (custom / "models" / "my-model-7b.toml").read_text()
    assert "my-model-7b" in at.dataframe[0].value["key"].tolist()
    at.switch_page("pages/explorer.py").run()
    at.selectbox(key="ex_model").set_value("my-model-7b").run()
    assert not at.exception
    assert at.selectbox(key="ex_weights").value == "awq"  # generic format: kept
    assert any(m.label == "C_vram (memory)" for m in at.metric)


def test_a_bad_entry_is_refused_with_the_field_and_the_inputs_kept(custom: Path) -> None:
    at = open_catalog()
    fill_model_form(at, "Not A Key")
    at.button[0].click().run()
    assert not at.exception
    assert "Not saved" in at.error[0].value and "key" in at.error[0].value
    assert at.text_input(key="cm_key").value == "Not A Key"  # nothing lost
    assert not (custom / "models").exists()


@pytest.mark.slow
def test_a_custom_gpu_through_the_form(custom: Path) -> None:
    at = open_catalog()
    at.segmented_control(key="cat_kind").set_value("gpu").run()
    at.text_input(key="cg_key").set_value("my-card")
    at.text_input(key="cg_name").set_value("My card")
    at.text_input(key="cg_source").set_value("datasheet")
    at.text_input(key="cg_psource").set_value("quote")
    at.button[0].click().run()
    assert not at.error, at.error
    assert "my-card" in at.dataframe[1].value["key"].tolist()


def test_catalog_in_chinese(custom: Path) -> None:
    at = open_catalog("zh")
    assert at.title[0].value == "目录：模型与 GPU"
    assert "各类层数" in at.dataframe[0].value.columns
    assert [t.label for t in at.tabs] == ["模型", "GPU", "添加自定义"]


@pytest.mark.slow
def test_every_missing_field_is_named_at_once_in_plain_words(custom: Path) -> None:
    """Issue 14 item 13: one submit names every empty field by its label (not 'entry '':
    field 'key'...', one per submit), and the intro names the folder actually used."""
    at = open_catalog()
    assert str(custom) in at.caption[1].value and "data/custom" not in at.caption[1].value
    at.text_input(key="cm_name").set_value("")
    at.button[0].click().run()
    assert not at.exception
    msg = at.error[0].value
    assert msg.startswith("Not saved: fill in ")
    for label in ("key (lower-case", "display name", "source (where", ):
        assert label in msg
    assert "entry" not in msg and "field" not in msg
    at.segmented_control(key="cat_kind").set_value("gpu").run()
    at.text_input(key="cg_memtype").set_value(" ")
    at.button[0].click().run()
    assert all(w in at.error[0].value for w in ("key (lower-case", "display name",
                                                 "memory type", "source (where"))
    assert not (custom / "models").exists() and not (custom / "gpus").exists()
    zh = open_catalog("zh")
    zh.button[0].click().run()
    assert zh.error[0].value.startswith("未保存：请填写键（小写")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_model_file_upload_is_offered(custom: Path, lang: str) -> None:
    """The 'model file' tab offers a config.json / GGUF upload in both languages (AppTest
    cannot feed a file; the reading and saving are tests/test_model_files.py's)."""
    at = open_catalog(lang)
    at.segmented_control(key="cat_kind").set_value("modelfile").run()
    assert not at.exception and not at.error
    assert any("GGUF" in c.value for c in at.caption)
    assert at.text_input(key="mf_key").value == ""
