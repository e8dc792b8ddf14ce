"""The functions' source archive (shared/deployment/package.py): what Cloud Run
functions builds from, reproducible so that its name can be its content's hash."""

from __future__ import annotations

import io
import subprocess
import sys
import tomllib
import zipfile

from shared.deployment.cli import repo_root
from shared.deployment.package import archive, archive_files, object_name

ROOT = repo_root()


def test_the_archive_holds_the_entry_points_the_library_and_the_runtime_requirements():
    files = archive_files(ROOT)
    assert files["main.py"] == (ROOT / "functions" / "main.py").read_bytes()
    assert "shared/__init__.py" in files
    assert "shared/jobs/submit.py" in files
    assert not [name for name in files if "__pycache__" in name or name.endswith(".pyc")]
    assert not [name for name in files if name.startswith(("sandbox/", "tests/", "services/"))]
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "dependencies"]
    assert files["requirements.txt"].decode().splitlines() == dependencies


def test_the_same_source_makes_the_same_bytes_and_any_change_a_new_name():
    files = archive_files(ROOT)
    first, again = archive(files), archive(dict(reversed(list(files.items()))))
    assert first == again
    changed = archive({**files, "shared/__init__.py": files["shared/__init__.py"] + b"\n"})
    assert object_name(changed) != object_name(first)
    assert object_name(first).startswith("functions/accelops-")
    with zipfile.ZipFile(io.BytesIO(first)) as zipped:
        assert {info.date_time for info in zipped.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_the_extracted_archive_imports_every_entry_point_from_itself(tmp_path):
    """As the functions' build would: main.py at the root, shared/ beside it."""
    with zipfile.ZipFile(io.BytesIO(archive(archive_files(ROOT)))) as zipped:
        zipped.extractall(tmp_path)
    probe = ("import main, shared; print(shared.__file__); "
             "print(' '.join(sorted(n for n in main.__all__ if callable(getattr(main, n)))))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False, env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    where, entry_points = done.stdout.splitlines()
    assert where == str(tmp_path / "shared" / "__init__.py")
    assert entry_points.split() == sorted(
        ["deploy_model", "ingest_metrics", "pool_schedule", "reconcile_models",
         "reconcile_slices", "submit_job", "team_usage"])
