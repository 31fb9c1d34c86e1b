"""The failure notification, as code: a Prefect automation that sends a notification when a flow
run of trainwise's flows fails or crashes (a nightly re-tune that nobody watches).

``trainwise setup --notify-webhook URL`` saves a Custom Webhook notification block for the URL
(Prefect posts the message as JSON ``{"text": ...}``); ``--notify-block TYPE/NAME`` uses a
notification block the team already saved (``slack-webhook/alerts``, ``ms-teams-webhook/ops``;
those keep their URL secret). Either way :func:`ensure_failure_automation` creates the
automation, or updates the one of the same name, so running setup again changes the target
instead of adding a second automation.

The trigger is reactive: one ``prefect.flow-run.Failed`` or ``prefect.flow-run.Crashed`` event
whose flow is one of :data:`FLOW_NAMES` fires it, once per flow run. A run that a deployment's
concurrency limit cancelled (``CANCEL_NEW``) ends Cancelled, not Failed, and sends nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.exceptions import ObjectNotFound

from core.errors import UserError

AUTOMATION_NAME = "trainwise-failed-runs"
WEBHOOK_BLOCK = "trainwise-failures"
#: the flows whose failed or crashed runs notify (flows/*.py)
FLOW_NAMES = ("optimize", "seraph", "intune", "intunex")
FAILED_EVENTS = ("prefect.flow-run.Failed", "prefect.flow-run.Crashed")
SUBJECT = "trainwise: flow run {{ flow.name }}/{{ flow_run.name }} {{ flow_run.state.name }}"
BODY = (
    "Flow run {{ flow_run.name }} of flow {{ flow.name }} ended {{ flow_run.state.name }}: "
    "{{ flow_run.state.message }}\nDeployment: {{ deployment.name }}; flow run id {{ flow_run.id }}."
)


@dataclass(frozen=True)
class FailureAutomation:
    """What setup made: the automation's id and name, and the notification block it sends to."""

    id: UUID
    name: str
    block: str


def webhook_block(url: str) -> tuple[UUID, str]:
    """Save (or overwrite) the Custom Webhook block :data:`WEBHOOK_BLOCK` for ``url``."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    if not url.startswith(("https://", "http://")):
        raise UserError(f"--notify-webhook must be an http(s) URL, got {url!r}")
    block = CustomWebhookNotificationBlock(name=WEBHOOK_BLOCK, url=url, json_data={"text": "{{subject}}\n{{body}}"})
    block_id = block.save(WEBHOOK_BLOCK, overwrite=True)
    return block_id, f"custom-webhook/{WEBHOOK_BLOCK}"


def named_block(slug: str) -> tuple[UUID, str]:
    """The id of the saved notification block ``TYPE/NAME`` (e.g. ``slack-webhook/alerts``)."""
    kind, _, name = slug.partition("/")
    if not kind or not name:
        raise UserError(f"--notify-block must be TYPE/NAME such as slack-webhook/alerts, got {slug!r}")
    with get_client(sync_client=True) as client:
        try:
            doc = client.read_block_document_by_name(name=name, block_type_slug=kind)
        except ObjectNotFound:
            raise UserError(f"--notify-block {slug}: no block of type {kind!r} named {name!r} on the Prefect server; "
                            "save one first (UI: Blocks) or use --notify-webhook URL") from None
    if "notify" not in (doc.block_schema.capabilities if doc.block_schema else []):
        raise UserError(f"--notify-block {slug}: a {kind} block cannot send notifications; use a notification block "
                        "such as slack-webhook, ms-teams-webhook or custom-webhook")
    return doc.id, slug


def ensure_failure_automation(block_id: UUID, block: str) -> FailureAutomation:
    """Create the automation :data:`AUTOMATION_NAME`, or update the existing one, to notify
    ``block_id`` when a run of :data:`FLOW_NAMES` fails or crashes."""
    from prefect.automations import AutomationCore, EventTrigger, Posture, SendNotification

    automation = AutomationCore(
        name=AUTOMATION_NAME,
        description="trainwise setup: notify when a flow run of trainwise's flows fails or crashes",
        enabled=True,
        trigger=EventTrigger(
            expect=set(FAILED_EVENTS),
            match={"prefect.resource.id": "prefect.flow-run.*"},
            match_related={"prefect.resource.role": "flow", "prefect.resource.name": list(FLOW_NAMES)},
            for_each={"prefect.resource.id"},
            posture=Posture.Reactive,
            threshold=1,
            within=timedelta(0),
        ),
        actions=[SendNotification(block_document_id=block_id, subject=SUBJECT, body=BODY)],
    )
    with get_client(sync_client=True) as client:
        existing = client.read_automations_by_name(AUTOMATION_NAME)
        if existing:
            client.update_automation(existing[0].id, automation)
            for extra in existing[1:]:  # one automation of this name, not one per setup run
                client.delete_automation(extra.id)
            automation_id = existing[0].id
        else:
            automation_id = client.create_automation(automation)
    return FailureAutomation(id=automation_id, name=AUTOMATION_NAME, block=block)


def read_failure_automation() -> object | None:
    """The automation :data:`AUTOMATION_NAME` on the server, or None."""
    with get_client(sync_client=True) as client:
        found = client.read_automations_by_name(AUTOMATION_NAME)
    return found[0] if found else None
