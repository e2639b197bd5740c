"""What configures Strata, when it is hostile or a mistake, ends the command in
one line on stderr with exit code 2, and leaks nothing:

* a configuration file that is not a regular file (``/dev/zero``, a FIFO, a
  folder) or is far too large is refused unread, by the corpora file's variable
  and by ``--api-keys`` alike: no hang, no memory exhausted;
* YAML aliases that would expand the corpora file without bound ("billion
  laughs") are refused, while aliases that share a block of settings still work;
* a URL carrying a password or a key is refused wherever it is given, and the
  secret is in no output and no file the command leaves;
* a folder setting that names a file or a device is named in the error;
* an index is no more readable than its corpus folder, and the registry of
  corpora is readable by its owner only.

Every command runs as a user runs it: the ``strata`` console script in a
subprocess, from a temporary project folder."""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import pytest

SECRET = "PASS1234word"
EXE = Path(sys.executable).with_name("strata")


def _limits() -> None:
    """In the child: a umask the modes are checked against, and a memory cap, so
    that a command reading without bound fails instead of exhausting the machine."""
    os.umask(0o022)
    cap = 4 << 30
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def strata(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``strata ARGS`` in ``project``, with its own corpora file and Dagster home
    unless ``env`` says otherwise. The timeout is a hang check, not a timing."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("STRATA_") and k != "DAGSTER_HOME"}
    base.update(STRATA_CORPORA=str(project / "corpora.yaml"),
                DAGSTER_HOME=str(project / "dagster"), STRATA_SHARDS="1")
    base.update(env)
    return subprocess.run([str(EXE), *args], cwd=project, env=base, capture_output=True,
                          text=True, timeout=120, preexec_fn=_limits)


def one_line_error(proc: subprocess.CompletedProcess, *names: str) -> str:
    """The error line of a command refused as bad usage; it names ``names``."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder with a corpus folder ``docs`` in it."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "tides.md").write_text("# Tides\n\nThe gauge reads the tide.\n")
    return tmp_path


def _special(kind: str, where: Path) -> Path:
    if kind == "dev-zero":
        return Path("/dev/zero")
    path = where / f"special-{kind}"
    if kind == "fifo":
        os.mkfifo(path)  # no writer ever comes: an open without O_NONBLOCK would hang
    elif kind == "folder":
        path.mkdir()
    elif kind == "too-large":
        path.write_bytes(b"# " + b"x" * (5 << 20) + b"\ncorpora: {}\n")
    return path


# --------------------------------------------------------------------------- special files

@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "folder", "too-large"])
def test_a_corpora_file_that_is_no_regular_file_is_refused_unread(project, kind):
    path = _special(kind, project)
    proc = strata(project, "corpus", "list", STRATA_CORPORA=str(path))
    line = one_line_error(proc, "$STRATA_CORPORA", str(path))
    assert ("too large" if kind == "too-large" else "not a regular file") in line


@pytest.mark.parametrize("command", [["serve"], ["mcp", "--http"]])
@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
def test_an_api_key_file_that_is_no_regular_file_is_refused_unread(project, command, kind):
    path = _special(kind, project)
    proc = strata(project, *command, "--index", str(project / "none"), "--api-keys", str(path))
    one_line_error(proc, "--api-keys", str(path), "not a regular file")


# --------------------------------------------------------------------------- YAML aliases

BOMB = "\n".join(
    [f"{a}: &{a} [" + ", ".join([f"*{p}"] * 9 if p else ['"lol"'] * 9) + "]"
     for p, a in zip(["", *"abcdefgh"], "abcdefghi")]
    + ["corpora:", "  tides:", "    root: docs", "    llm:", "      model: *i", ""])


def test_a_billion_laughs_under_llm_is_refused_in_one_line(project):
    (project / "corpora.yaml").write_text(BOMB)
    line = one_line_error(strata(project, "corpus", "list"), str(project / "corpora.yaml"),
                          "aliases")
    assert "expand" in line


def test_an_alias_that_holds_itself_is_refused_in_one_line(project):
    (project / "corpora.yaml").write_text(
        "corpora:\n  tides: &t\n    root: docs\n    include: [*t]\n")
    one_line_error(strata(project, "corpus", "list"), str(project / "corpora.yaml"), "alias")


def test_aliases_that_share_settings_still_work(project):
    (project / "corpora.yaml").write_text(
        "shared: &shared\n  root: docs\n  include: ['*.md']\n  llm: {backend: offline}\n"
        "corpora:\n  one:\n    <<: *shared\n  two:\n    <<: *shared\n    out: idx-two\n")
    proc = strata(project, "corpus", "list")
    assert proc.returncode == 0, proc.stderr
    assert [line.split("\t")[0] for line in proc.stdout.splitlines()] == ["one", "two"]


# --------------------------------------------------------------------------- credentials

def _files_holding(folder: Path, secret: str) -> list[str]:
    return sorted(str(p) for p in folder.rglob("*")
                  if p.is_file() and not p.is_symlink() and secret.encode() in p.read_bytes())


URL_FLAGS = [("--llm-base-url", f"http://alice:{SECRET}@llm.example/v1"),
             ("--llm-base-url", f"http://llm.example/v1?api_key={SECRET}"),
             ("--embed-base-url", f"https://bob:{SECRET}@embed.example/v1"),
             ("--mirror", f"s3://AKIAEXAMPLE:{SECRET}@bucket/indexes/tides")]


@pytest.mark.parametrize(("flag", "url"), URL_FLAGS)
def test_corpus_add_refuses_a_url_with_credentials_and_stores_it_nowhere(project, flag, url):
    proc = strata(project, "corpus", "add", "docs", "--name", "tides", flag, url)
    one_line_error(proc, flag, "API_KEY" if flag != "--mirror" else "AWS_ACCESS_KEY_ID")
    assert SECRET not in proc.stdout + proc.stderr
    assert _files_holding(project, SECRET) == []
    assert not (project / "corpora.local.yaml").exists()


def test_strata_index_refuses_a_url_with_credentials_before_writing_anything(project):
    proc = strata(project, "index", "docs", "--corpus", "tides", "--out", "idx",
                  "--llm-backend", "openai", "--llm-base-url",
                  f"http://alice:{SECRET}@llm.example/v1")
    one_line_error(proc, "--llm-base-url", "http://***@llm.example/v1")
    assert SECRET not in proc.stdout + proc.stderr
    assert _files_holding(project, SECRET) == []
    assert not (project / "idx").exists() and not (project / "corpora.local.yaml").exists()


@pytest.mark.parametrize("var", ["STRATA_LLM_BASE_URL", "STRATA_EMBED_BASE_URL"])
def test_a_url_variable_with_credentials_is_refused_without_repeating_them(project, var):
    proc = strata(project, "index", "docs", "--corpus", "tides", "--out", "idx",
                  **{var: f"http://alice:{SECRET}@endpoint.example/v1"})
    one_line_error(proc, f"${var}")
    assert SECRET not in proc.stdout + proc.stderr
    assert not (project / "idx").exists()


@pytest.mark.parametrize("entry", [
    f"llm: {{backend: openai, base_url: 'http://alice:{SECRET}@llm.example/v1'}}",
    f"embedding: {{backend: openai, base_url: 'http://llm.example/v1?token={SECRET}'}}",
    f"mirror: 's3://AKIAEXAMPLE:{SECRET}@bucket/tides'"])
def test_a_corpora_file_with_credentials_in_a_url_is_refused(project, entry):
    (project / "corpora.yaml").write_text(f"corpora:\n  tides:\n    root: docs\n    {entry}\n")
    proc = strata(project, "corpus", "list")
    one_line_error(proc, "'tides'")
    assert SECRET not in proc.stdout + proc.stderr


def test_an_endpoint_error_never_shows_the_urls_credentials(monkeypatch):
    """A URL Strata never checked ($OPENAI_BASE_URL) reaches the probe: the error
    line, the URL it keeps for run metadata and the store's shown URI are
    without the secret."""
    from strata.core.llm.endpoints import EndpointError, probe, redact
    from strata.core.storage.object_store import clean_uri

    monkeypatch.setenv("OPENAI_BASE_URL", f"http://alice:{SECRET}@127.0.0.1:1/v1")
    with pytest.raises(EndpointError) as caught:
        probe("LLM", None, timeout_s=5)
    assert SECRET not in str(caught.value) and SECRET not in caught.value.url
    assert "http://***@127.0.0.1:1/v1" in str(caught.value)
    assert "refuses connections" in str(caught.value)
    assert SECRET not in redact(f"POST https://u:{SECRET}@h/v1/chat?x=1&api_key={SECRET}", None)
    assert clean_uri(f"s3://AKIA:{SECRET}@bucket/idx?region=eu") == "s3://***@bucket/idx"


# --------------------------------------------------------------------------- folder settings

@pytest.mark.parametrize(("var", "value", "command"), [
    ("STRATA_HOME", "/dev/null", ["corpus", "list"]),
    ("STRATA_HOME", "/dev/null/project", ["corpus", "list"]),
    ("STRATA_INDEX_DIR", "docs/tides.md", ["corpus", "list"]),
    ("STRATA_CACHE_DIR", "/dev/null", ["corpus", "list"]),
    ("STRATA_MODEL_CACHE", "/dev/zero", ["index", "docs", "--corpus", "tides", "--out", "idx"]),
    ("DAGSTER_HOME", "/dev/null", ["index", "docs", "--corpus", "tides", "--out", "idx"]),
])
def test_a_folder_setting_that_is_no_folder_is_named_in_one_line(project, var, value, command):
    env = {var: value}
    if var == "STRATA_HOME":  # the project folder decides where the corpora file is
        env["STRATA_CORPORA"] = ""
    proc = strata(project, *command, **env)
    line = one_line_error(proc, f"${var}")
    assert "not a folder" in line
    assert not (project / "idx").exists()


# --------------------------------------------------------------------------- file modes

def test_an_index_is_no_more_readable_than_its_corpus(project):
    """A 0600 file in a 0700 corpus folder: the index folder (made beforehand with
    0755, as an earlier Strata or the user left it) ends 0700, so nothing a build
    wrote in it, tables, vectors and caches alike, can be reached by others; the
    registry that names the corpus is 0600."""
    private = project / "private"
    private.mkdir()
    (private / "vault.md").write_text("# Vault\n\nThe vault code is kept in the ledger.\n")
    (private / "vault.md").chmod(0o600)
    private.chmod(0o700)
    out = project / "idx"
    out.mkdir()
    out.chmod(0o755)
    proc = strata(project, "index", "private", "--corpus", "vault", "--out", "idx", "-q")
    assert proc.returncode == 0, proc.stderr
    assert (out / "CURRENT").is_file()
    assert stat.S_IMODE(out.stat().st_mode) & 0o077 == 0
    assert stat.S_IMODE((project / "corpora.local.yaml").stat().st_mode) == 0o600


def test_a_shared_corpus_keeps_its_index_as_shared_and_no_more(tmp_path):
    from strata.core.storage.ownership import as_private_as

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    corpus.chmod(0o750)
    old = os.umask(0o022)
    try:
        as_private_as(tmp_path / "new" / "idx", corpus)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new" / "idx").stat().st_mode) == 0o750
    wide = tmp_path / "wide"
    wide.mkdir()
    wide.chmod(0o777)
    as_private_as(wide, corpus)
    assert stat.S_IMODE(wide.stat().st_mode) == 0o750
