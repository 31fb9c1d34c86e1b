"""Typed flow parameters: what the Prefect UI's run form renders as a form.

The ``optimize``, ``seraph`` and ``intune`` flows take their workload either as a file
(``config``, a path relative to the working directory: the project root, or the checkout a
work pool's worker enters) or typed (``workload``, the :class:`~optimizers.spec.WorkloadSpec`
such a file holds). Prefect derives the deployment's parameter schema from the flow's
signature, so the UI's custom-run page shows ``workload`` as a form: its sections, each
field with its description and default, and choices as drop-downs. A ``workload`` given
wins over ``config``; it passes the same checks as a file (:func:`optimizers.spec.parse_spec`).

The form's ``rl`` section is the Seraph request model itself
(:class:`~optimizers.seraph.request.SeraphRequest`, through :class:`~optimizers.spec.RLSpec`),
and its ``ingestion`` section the ingestion request model
(:class:`~optimizers.ingest_request.IngestRequest`, through :class:`~optimizers.spec.IngestSpec`):
their fields, descriptions, defaults and YAML keys are the ones ``trainwise rl tune``'s and
``trainwise ingest tune``'s flags are generated from, so the flows' parameters cannot drift from
the CLI's (``tests/test_code_shape.py``).
"""

from __future__ import annotations

from typing import Literal

from core.errors import UserError
from optimizers.spec import WorkloadSpec, load_spec, parse_spec

#: How the report names a workload given as the ``workload`` parameter instead of a file.
WORKLOAD_PARAMETER = "the workload parameter"


def workload_spec(config: str, workload: WorkloadSpec | None,
                  need: Literal["rl", "ingestion"] | None = None) -> tuple[WorkloadSpec, str]:
    """The validated workload and where it came from (the file, or :data:`WORKLOAD_PARAMETER`).

    ``need`` names the section the flow cannot do without, as in :func:`~optimizers.spec.load_spec`."""
    if workload is None:
        return load_spec(config, need=need), config
    spec = parse_spec(workload.model_dump(mode="json", exclude_unset=True), WORKLOAD_PARAMETER)
    if need is not None and getattr(spec, need) is None:
        raise UserError(f"{WORKLOAD_PARAMETER}: this flow needs a '{need}' section; it has "
                        f"{[s for s in ('rl', 'ingestion') if getattr(spec, s)]}")
    return spec, WORKLOAD_PARAMETER
