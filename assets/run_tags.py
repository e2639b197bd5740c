"""What the run list says about a build: its corpus, the LLM and the embedding
model it used, and who launched it, as run tags (filterable in the UI's Runs
page, e.g. ``strata/llm=openai:gpt-4o-mini``).

`strata index`, the change sensor and the nightly schedule set them when they
create the run. A run launched from the UI carries only Dagster's own tags, so
the first steps that know the answer add what is missing: ``nodes`` the corpus
and the launcher, ``summaries`` the LLM, ``embeddings`` the model.
"""

from __future__ import annotations

CORPUS_TAG = "strata/corpus"
LLM_TAG = "strata/llm"
EMBEDDING_TAG = "strata/embedding"
LAUNCHED_BY_TAG = "strata/launched_by"
CLI_TAG = "strata/cli"  # set on the runs of `strata index`
OUT_TAG = "strata/out"  # the index folder a `strata index` run builds
USER_TAG = "user"  # Dagster's UI shows it in the runs' "Launched by" column


def build_tags(spec, llm=None, embedder=None) -> dict[str, str]:
    """The tags of a run building ``spec`` with these resources (a corpus's
    remembered settings win over the resources', as in the run itself)."""
    tags = {CORPUS_TAG: spec.name}
    if llm is not None:
        tags[LLM_TAG] = llm.label(spec.llm)
    if embedder is not None:
        from strata.core.encoders.corpus_encoder import built_encoder
        from strata.core.storage.layout import IndexLayout

        previous = built_encoder(IndexLayout(spec.out))
        tags[EMBEDDING_TAG] = embedding_label(embedder.spec_for(spec.embedding, previous))
    return tags


def embedding_label(enc_spec) -> str:
    return enc_spec.label


def launched_by(tags: dict) -> str:
    """Who launched a run, from the tags Dagster and Strata put on it."""
    if tags.get(CLI_TAG):
        return "strata index"
    if tags.get("dagster/sensor_name"):
        return f"sensor {tags['dagster/sensor_name']}"
    if tags.get("dagster/schedule_name"):
        return f"schedule {tags['dagster/schedule_name']}"
    if tags.get("dagster/backfill"):
        return "backfill"
    if tags.get("dagster/from_ui") == "true":
        return "the UI"
    return "the API"


def fill_run_tags(context, tags: dict[str, str]) -> None:
    """Add those of ``tags`` the run does not carry yet (never overwrite one)."""
    have = context.run.tags
    missing = {k: v for k, v in tags.items() if v and k not in have}
    if not missing:
        return
    try:
        context.instance.add_run_tags(context.run.run_id, missing)
    except Exception as e:  # noqa: BLE001 - a label, never a reason to fail a build
        context.log.debug(f"could not tag the run: {e}")
