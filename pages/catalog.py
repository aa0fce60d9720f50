"""Catalog: browse models and GPUs with their sources, and add your own (form or TOML upload).

Draws only: tables come from `capacity.catalog.custom`, validation is the catalog loader's.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

from app import auth, cache
from app.bootstrap import ensure_navigation
from app.format import markdown_plain
from app.state import init_lang
from capacity.access import Right
from capacity.catalog import custom as catalog_custom
from capacity.catalog import model_files
from capacity.catalog.loader import LAYER_KINDS
from capacity.errors import CapacityError
from capacity.report import catalog_tables
from capacity.report.i18n import error_text, note_text, t

ensure_navigation()
lang = init_lang()


def T(k: str, **kw: object) -> str:  # noqa: N802 - the usual name for a translator
    return t(k, lang, **kw)


def missing(fields: dict[str, str]) -> bool:
    """Name every empty required field at once, in the form's own words; True when any is."""
    empty = [T(label) for label, value in fields.items() if not value.strip()]
    if empty:
        st.error(T("cat_missing", fields=T("list_sep").join(empty)))
    return bool(empty)


def not_saved(exc: CapacityError) -> None:
    """Why an entry was not saved; the message quotes the entry, so it is shown as plain text
    (an uploaded `![x](http://evil/)` must not make the browser fetch anything)."""
    st.error(T("not_saved", msg=markdown_plain(error_text(exc, lang))))


def may_save(overwrite: bool) -> bool:
    """The check at the save itself (the widgets are disabled too): an editor adds entries,
    an admin alone replaces one (a bundled one for everyone); the reason shown when not."""
    if auth.refused(Right.SAVE_CATALOG, lang):
        return False
    return not (overwrite and auth.refused(Right.REPLACE_ENTRY, lang))


def saved(message: str) -> None:
    """Rerun so every table and list shows the new entry: the file's new stamp is part of every
    cache key (`app.cache.data_version`), so this session and every other one read it anew."""
    st.session_state["cat_flash"] = message
    st.rerun()


st.title(T("cat_title"))
st.caption(T("cat_intro"))
if "cat_flash" in st.session_state:
    st.success(st.session_state.pop("cat_flash"))

try:
    catalog = cache.catalog()
except CapacityError as exc:
    st.error(T("err_catalog", msg=error_text(exc, lang)))
    st.stop()
for catalog_warning in catalog.warnings:  # a bad custom file, skipped: name it, to be fixed
    st.warning(markdown_plain(note_text(catalog_warning, lang)))  # it quotes the file: plain text

def table_height(n_rows: int) -> int:
    """Pixels that show every row and the header, no more: Streamlit's rows are 35 px, plus 3
    for the borders (36 x rows left an empty row under the last)."""
    return 35 * (n_rows + 1) + 3


models_tab, gpus_tab, add_tab = st.tabs([T("tab_models"), T("tab_gpus"), T("tab_add")])

with models_tab:
    rows = pd.DataFrame(catalog_tables.model_rows(
        catalog, kind_names={k: T("layer_" + k) for k in LAYER_KINDS},
        window=T("layer_window", kind="{kind}", w="{w}")))
    rows["embeddings"] = [T("emb_" + v) for v in rows["embeddings"]]
    rows.columns = [T("mc_" + c) for c in rows.columns]
    st.dataframe(rows, hide_index=True, width="stretch", key="cat_models",
                 height=table_height(len(rows)),
                 column_config={T("mc_kv_kib_per_token_fp16"): st.column_config.NumberColumn(
                     format="%.1f"), T("mc_kv_kib_per_token_fp8"):
                     st.column_config.NumberColumn(format="%.1f"),
                     # the whole key and name (qwen3-235b-a22b was cut to 'qwen3-235b-a22')
                     T("mc_key"): st.column_config.TextColumn(width="medium"),
                     T("mc_name"): st.column_config.TextColumn(width="medium")})

with gpus_tab:
    rows = pd.DataFrame(catalog_tables.gpu_rows(catalog))
    rows.columns = [T("gc_" + c) for c in rows.columns]
    st.dataframe(rows, hide_index=True, width="stretch", key="cat_gpus",  # '-': not published
                 height=table_height(len(rows)), placeholder="-")

with add_tab:
    st.caption(T("add_intro", folder=str(catalog_custom.custom_dir())))
    can_add, can_replace = auth.allowed(Right.SAVE_CATALOG), auth.allowed(Right.REPLACE_ENTRY)
    auth.read_only_note(Right.SAVE_CATALOG if not can_add else Right.REPLACE_ENTRY, lang)
    kind = st.segmented_control(T("add_kind"), ["model", "gpu", "modelfile", "upload"],
                                key="cat_kind",
                                format_func=lambda k: T("kind_" + k), default="model",
                                required=True)
    today = dt.date.today().isoformat()[:7]
    if kind == "model":
        with st.form("cat_model_form"):
            c1, c2, c3 = st.columns(3)
            key = c1.text_input(T("f_key"), key="cm_key")
            name = c2.text_input(T("f_name"), key="cm_name")
            params = c3.number_input(T("f_params_b"), min_value=0.0, value=7.0, step=0.1,
                                     key="cm_params")
            num_layers = c1.number_input(T("f_num_layers"), min_value=1, value=32,
                                         key="cm_layers")
            full = c2.number_input(T("f_full_layers"), min_value=1, value=32, key="cm_full")
            linear = c3.number_input(T("f_linear_layers"), min_value=0, value=0,
                                     key="cm_linear")
            kv_heads = c1.number_input(T("f_kv_heads"), min_value=1, value=8, key="cm_kv")
            head_dim = c2.number_input(T("f_head_dim"), min_value=1, value=128, key="cm_hd")
            q_heads = c3.number_input(T("f_q_heads"), min_value=1, value=32, key="cm_q")
            hidden = c1.number_input(T("f_hidden"), min_value=1, value=4096, key="cm_hidden")
            vocab = c2.number_input(T("f_vocab"), min_value=1, value=128000, key="cm_vocab")
            max_ctx = c3.number_input(T("f_max_context_tokens"), min_value=1, value=131072,
                                      key="cm_ctx")
            state_bytes = c1.number_input(T("f_state_bytes"), min_value=0.0, value=0.0,
                                          key="cm_state")
            weights_gb = c2.number_input(T("f_weights_gb"), min_value=0.0, value=0.0,
                                         key="cm_wgb")
            weights_fmt = c3.selectbox(T("f_weights_format"), sorted(catalog.formats),
                                       key="cm_wfmt")
            tied = c1.selectbox(T("f_tied"), ["unknown", "tied", "separate"], key="cm_tied",
                                format_func=lambda k: T("f_tied_" + k), help=T("f_tied_help"))
            source = st.text_input(T("f_source"), key="cm_source")
            as_of = st.text_input(T("f_as_of"), value=today, key="cm_asof")
            overwrite = st.checkbox(T("f_replace"), key="cm_replace", disabled=not can_replace)
            submitted = st.form_submit_button(T("f_save"), disabled=not can_add)
        if submitted and may_save(overwrite) and not missing({
                "f_key": key, "f_name": name, "f_source": source, "f_as_of": as_of}):
            table = catalog_custom.model_form_table(
                key=key, name=name, params_b=params, num_layers=int(num_layers),
                full_layers=int(full), kv_heads=int(kv_heads), head_dim=int(head_dim),
                q_heads=int(q_heads), hidden=int(hidden), vocab=int(vocab),
                max_context_tokens=int(max_ctx), linear_layers=int(linear),
                state_bytes=float(state_bytes), weights_gb=weights_gb or None,
                weights_format=weights_fmt, source=source, as_of=as_of,
                tied_embeddings=None if tied == "unknown" else tied == "tied")
            try:
                model, path = catalog_custom.save_model(table, catalog, overwrite=overwrite)
            except CapacityError as exc:
                not_saved(exc)
            else:
                saved(T("saved", kind=T("kind_model"), key=model.key, path=path))
    elif kind == "gpu":
        with st.form("cat_gpu_form"):
            c1, c2, c3 = st.columns(3)
            key = c1.text_input(T("f_key"), key="cg_key")
            name = c2.text_input(T("f_name"), key="cg_name")
            memory = c3.number_input(T("f_memory_gb"), min_value=0.0, value=24.0,
                                     key="cg_mem")
            mem_type = c1.text_input(T("f_memory_type"), value="GDDR6X", key="cg_memtype")
            bw = c2.number_input(T("f_bandwidth_gb_s"), min_value=0.0, value=1000.0,
                                 key="cg_bw")
            bf16 = c3.number_input(T("f_bf16_tflops"), min_value=0.0, value=100.0,
                                   key="cg_bf16")
            fp8 = c1.number_input(T("f_fp8_tflops"), min_value=0.0, value=0.0, key="cg_fp8")
            int8 = c2.number_input(T("f_int8_tops"), min_value=0.0, value=0.0, key="cg_int8")
            fp4 = c3.number_input(T("f_fp4_tflops"), min_value=0.0, value=0.0, key="cg_fp4")
            driver = c1.number_input(T("f_memory_driver_gib"), min_value=0.0, value=0.0,
                                     key="cg_driver", help=T("f_memory_driver_help"))
            link = c2.text_input(T("f_interconnect"), value="PCIe 4.0 x16", key="cg_link")
            link_kind = c3.selectbox(T("f_interconnect_kind"),
                                     ["pcie", "nvlink", "infinity-fabric"], key="cg_linkkind")
            link_bw = c1.number_input(T("f_interconnect_gb_s"), min_value=0.0, value=25.0,
                                      key="cg_linkbw")
            price = c2.number_input(T("f_price_per_hour"), min_value=0.0, value=2.0,
                                    key="cg_price")
            currency = c3.selectbox(T("currency"), ["CNY", "USD"], key="cg_cur")
            price_source = c1.text_input(T("f_price_source"), key="cg_psource")
            as_of = c2.text_input(T("f_as_of"), value=today, key="cg_asof")
            source = st.text_input(T("f_source"), key="cg_source")
            overwrite = st.checkbox(T("f_replace"), key="cg_replace", disabled=not can_replace)
            submitted = st.form_submit_button(T("f_save"), disabled=not can_add)
        if submitted and may_save(overwrite) and not missing({
                "f_key": key, "f_name": name, "f_memory_type": mem_type,
                "f_interconnect": link, "f_source": source, "f_as_of": as_of}):
            table = catalog_custom.gpu_form_table(
                key=key, name=name, memory_gb=memory, memory_type=mem_type,
                bandwidth_gb_s=bw, bf16_tflops=bf16, fp8_tflops=fp8 or None,
                int8_tops=int8 or None, fp4_tflops=fp4 or None,
                memory_driver_gib=driver or None, interconnect=link,
                interconnect_kind=link_kind,
                interconnect_gb_s=link_bw, price_per_hour=price, currency=currency,
                price_source=price_source, source=source, as_of=as_of)
            try:
                gpu, path = catalog_custom.save_gpu(table, overwrite=overwrite)
            except CapacityError as exc:
                not_saved(exc)
            else:
                saved(T("saved", kind=T("kind_gpu"), key=gpu.key, path=path))
    elif kind == "modelfile":
        st.caption(T("mf_intro"))
        upload = st.file_uploader(T("f_modelfile"), type=["json", "gguf"], key="cat_modelfile",
                                  disabled=not can_add)
        c1, c2, c3 = st.columns(3)
        key = c1.text_input(T("mf_key"), key="mf_key")
        weights_gb = c2.number_input(T("mf_weights_gb"), min_value=0.0, value=0.0,
                                     key="mf_wgb")
        weights_fmt = c3.selectbox(T("f_weights_format"), sorted(catalog.formats),
                                   index=sorted(catalog.formats).index("bf16"), key="mf_wfmt")
        overwrite = st.checkbox(T("f_replace"), key="mf_replace", disabled=not can_replace)
        if (upload is not None and st.button(T("f_save"), key="mf_save", disabled=not can_add)
                and may_save(overwrite)):
            try:
                table = model_files.table_from_upload(
                    upload.getvalue(), upload.name, key=key.strip().lower() or None,
                    as_of=dt.date.today().isoformat(), weights_bytes=weights_gb * 1e9 or None,
                    weights_format=weights_fmt)
                model, path = catalog_custom.save_model(table, catalog, overwrite=overwrite)
            except CapacityError as exc:
                not_saved(exc)
            else:
                saved(T("saved", kind=T("kind_model"), key=model.key, path=path))
    else:
        upload = st.file_uploader(T("f_upload"), type=["toml"], key="cat_upload",
                                  disabled=not can_add)
        overwrite = st.checkbox(T("f_replace"), key="cu_replace", disabled=not can_replace)
        if (upload is not None and st.button(T("f_save"), key="cu_save", disabled=not can_add)
                and may_save(overwrite)):
            try:
                what, entry_key, path = catalog_custom.save_toml(
                    upload.getvalue(), catalog, overwrite=overwrite, name=upload.name)
            except CapacityError as exc:
                not_saved(exc)
            else:
                saved(T("saved", kind=T("kind_" + what), key=entry_key, path=path))
