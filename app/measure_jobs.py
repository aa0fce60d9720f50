"""The Measure page's list of measurements: every run this app runs or recently ran that the
user may see (`capacity.bench.job.JobRegistry.visible`: their own, an admin's everyone's,
everyone's without sign-in), each with its progress per level, from any browser tab, a reloaded
or new one too (issue 28: runs are the deployment's, not the tab's). This tab's own job comes
first; a job may be stopped only by whom `capacity.access` lets (the registry checks again).
"""

from __future__ import annotations

import streamlit as st

from app import auth
from app import measure_state as ms
from capacity.access import AccessDenied, Right, User
from capacity.bench.job import JobState, OwnedJob
from capacity.report.i18n import t, tn


def visible(user: User) -> list[OwnedJob]:
    """The jobs this session lists: its own first (kept even once the registry forgot it),
    then the registry's running and recent ones within the user's scope."""
    mine = ms.job()
    seen = ms.JOBS.visible(user.scope)
    own = [o for o in seen if o.job is mine]
    if mine is not None and not own:
        own = [OwnedJob(number=0, owner=user.id, job=mine)]
    return [*own, *(o for o in seen if o.job is not mine)]


def draw(user: User, can: bool, lang: str) -> None:
    """Every visible job with its progress (the body of the page's polling fragment)."""
    jobs = visible(user)
    if not jobs:
        st.caption(t("m_no_jobs_visible", lang))
        return
    mine = ms.job()
    headed = False
    for o in jobs:
        own = o.job is mine
        if not own and not headed:  # the others' heading, once
            st.markdown(f"**{t('m_jobs_visible', lang)}**")
            headed = True
        _draw_one(o, own=own, user=user, can=can, lang=lang)
    if mine is not None and not mine.running and st.session_state.get("m_last_done") != id(mine):
        st.session_state["m_last_done"] = id(mine)
        st.rerun()  # re-enable the start button


def _draw_one(o: OwnedJob, *, own: bool, user: User, can: bool, lang: str) -> None:
    """One job: its label and status, which run of the job goes, a bar per level, and Stop
    while it runs; once ended, the runs it stored (or why it failed)."""
    j = o.job
    status = j.status()
    title = t("m_progress", lang, label=j.form.label, status=t("m_status_" + status, lang))
    if own:
        st.subheader(title)
    else:
        st.markdown(f"**{title}**")
        who = (t("m_job_owner", lang, owner=o.owner) if o.owner and o.owner != user.id
               else t("m_job_other_tab", lang))
        st.caption(who)
    if j.total > 1:
        st.caption(t("m_queue", lang, i=j.position, n=j.total, chars=j.form.prompt_chars))
    for lv in j.progress():
        ttft = "-" if lv.ttft_p50_ms is None else f"{lv.ttft_p50_ms:.1f}"
        tpot = "-" if lv.tpot_p50_ms is None else f"{lv.tpot_p50_ms:.2f}"
        st.progress(lv.fraction, text=tn("m_level", lv.errors, lang, c=lv.concurrency,
                                         done=lv.done, total=lv.total, errors=lv.errors,
                                         ttft=ttft, tpot=tpot))
    if status == JobState.RUNNING:
        key = "m_stop" if own else f"m_job_stop_{o.number}"
        if (st.button(t("m_stop", lang), key=key, disabled=not can)
                and not auth.refused(Right.MEASURE, lang)):
            try:
                if o.number:
                    ms.JOBS.stop(o.number, scope=user.scope)
                else:  # this tab's own job, no longer in the registry
                    j.stop()
            except AccessDenied:
                st.error(t("auth_not_yours", lang))
            else:
                st.rerun()
        return
    dirs = j.run_dirs()
    if status == JobState.FAILED and j.find_run_dir() is None:
        st.error(t("m_failed", lang))  # the log as code: it quotes the server, never Markdown
        st.code(j.log_tail(), language=None)
    for d in dirs:
        st.success(t("m_done", lang, run=d.name, label=d.parent.name))
    if dirs:
        st.markdown(f"[{t('m_open_results', lang)}](/results)")
