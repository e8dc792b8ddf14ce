"""The Sax cell's settings: the ConfigMap the deployment writes and serving reads.

The deployment (``shared/deployment/serving.py``) creates it in the serving
namespace with the cell's ``SAX_ROOT``; ``deploy_model`` reads it to point a
version's model servers at the cell. The name is spelled here, in the package that
reads it: the deployment definition describes serving and imports it, and serving
code needs nothing from the deployment package.
"""

from __future__ import annotations

__all__ = ["SAXML_CONFIG_MAP"]

SAXML_CONFIG_MAP = "accelops-saxml"
