/**
 * The functions' source archive, built from the repository and uploaded under its
 * content hash, so that a deployment is reproducible from a commit: a new source
 * is a new object name, which redeploys the functions, and the same source keeps
 * the name, which changes nothing.
 *
 * The archive holds, at its root, main.py (a copy of functions/main.py: Cloud Run
 * functions load main.py), the shared/ package, and requirements.txt
 * (terraform/generated/function_requirements.txt: the distributions the functions
 * import, with pyproject.toml's bounds). Entries are sorted and carry no
 * timestamps (hashicorp/archive: ArchiveMultiple, zip_archiver.go), so the same
 * files make the same bytes. The data source builds it at plan time (docs,
 * data-sources/file.md); output_sha256 is in the data source since archive 2.4.0.
 * This module has no depends_on, so the archive (and its name) is known at plan.
 */

locals {
  package_files = sort(setunion(
    fileset(var.repository_root, "${var.package}/**/*.py"),
    fileset(var.repository_root, "${var.package}/**/py.typed"),
  ))
}

data "archive_file" "source" {
  type        = "zip"
  output_path = var.output_path

  source {
    filename = "main.py"
    content  = file("${var.repository_root}/${var.entry_module}")
  }

  source {
    filename = "requirements.txt"
    content  = file(var.requirements_file)
  }

  dynamic "source" {
    for_each = local.package_files
    content {
      filename = source.value
      content  = file("${var.repository_root}/${source.value}")
    }
  }
}

resource "google_storage_bucket_object" "source" {
  bucket       = var.bucket
  name         = "${var.object_prefix}${data.archive_file.source.output_sha256}.zip"
  source       = data.archive_file.source.output_path
  content_type = "application/zip"

  # The new archive exists before the old one is removed (the bucket keeps the
  # old one as a noncurrent version for rollbacks).
  lifecycle {
    create_before_destroy = true
  }
}
