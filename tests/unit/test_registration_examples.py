"""The registration examples use only fields kube-scheduler decodes, with the types it decodes them as.

The models mirror kube-scheduler's own types (``KubeSchedulerConfiguration`` v1 and its ``Extender``;
the legacy ``Policy`` v1 and its ``ExtenderConfig``), strict and closed: a misspelt field
(``enableHttps`` in a v1 file, ``enableHTTPS`` in a policy file) or a duration of the wrong form fails
here as kube-scheduler's strict decoding would. The end-to-end tier then starts kube-scheduler with
the v1 files (tests/e2e/test_deploy.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from app.settings import Settings

GANG_WINDOW = Settings.model_fields["gang_window_seconds"].default

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "registration"
V1_FILES = ("scheduler-config.yaml", "managed-resources.yaml", "mutual-tls.yaml")

# Go's time.ParseDuration: a sequence of decimal numbers, each with a unit.
GO_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")
GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration_seconds(text: str) -> float:
    return sum(float(n) * GO_UNITS[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)(ns|us|µs|ms|s|m|h)", text))


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class TLSConfig(Closed):
    insecure: bool = False
    serverName: str = ""
    certFile: str = ""
    keyFile: str = ""
    caFile: str = ""
    certData: str = ""  # base64 in both forms ([]byte)
    keyData: str = ""
    caData: str = ""


class ManagedResource(Closed):
    name: str
    ignoredByScheduler: bool = False


class ExtenderFields(Closed):
    """The fields both forms spell alike."""

    urlPrefix: str
    filterVerb: str = ""
    preemptVerb: str = ""
    prioritizeVerb: str = ""
    weight: int = 0
    bindVerb: str = ""
    tlsConfig: TLSConfig | None = None
    nodeCacheCapable: bool = False
    managedResources: list[ManagedResource] = Field(default_factory=list)
    ignorable: bool = False


class ExtenderV1(ExtenderFields):
    enableHTTPS: bool = False
    httpTimeout: str = "5s"  # metav1.Duration: a Go duration string

    @field_validator("httpTimeout")
    @classmethod
    def _duration(cls, value: str) -> str:
        if not GO_DURATION.match(value):
            raise ValueError(f"not a Go duration: {value!r}")
        return value


class LeaderElection(Closed):
    leaderElect: bool = True
    leaseDuration: str = "15s"
    renewDeadline: str = "10s"
    retryPeriod: str = "2s"
    resourceLock: str = "leases"
    resourceName: str = "kube-scheduler"
    resourceNamespace: str = "kube-system"


class ClientConnection(Closed):
    kubeconfig: str = ""
    acceptContentTypes: str = ""
    contentType: str = ""
    qps: float = 50
    burst: int = 100


class Profile(Closed):
    schedulerName: str = "default-scheduler"


class KubeSchedulerConfiguration(Closed):
    apiVersion: Literal["kubescheduler.config.k8s.io/v1"]
    kind: Literal["KubeSchedulerConfiguration"]
    clientConnection: ClientConnection | None = None
    leaderElection: LeaderElection | None = None
    profiles: list[Profile] = Field(default_factory=list)
    extenders: list[ExtenderV1] = Field(default_factory=list)


class LegacyExtender(ExtenderFields):
    enableHttps: bool = False
    httpTimeout: int = 0  # time.Duration: integer nanoseconds


class LegacyPolicy(Closed):
    kind: Literal["Policy"]
    apiVersion: Literal["v1"]
    extenders: list[LegacyExtender]


def load_v1(name: str) -> KubeSchedulerConfiguration:
    return KubeSchedulerConfiguration.model_validate(yaml.safe_load((EXAMPLES / name).read_text()))


def load_policy() -> LegacyPolicy:
    return LegacyPolicy.model_validate(json.loads((EXAMPLES / "policy.json").read_text()))


@pytest.mark.parametrize("name", V1_FILES)
def test_v1_examples_register_the_recommended_entries(name: str) -> None:
    config = load_v1(name)
    fast, bind = config.extenders[0], config.extenders[1]
    assert (fast.filterVerb, fast.prioritizeVerb, fast.preemptVerb, fast.bindVerb) == (
        "filter",
        "prioritize",
        "preempt",
        "",
    )
    assert fast.nodeCacheCapable and fast.weight >= 1 and not fast.managedResources
    assert (bind.bindVerb, bind.filterVerb, bind.prioritizeVerb) == ("bind", "", "")
    assert bind.nodeCacheCapable and not bind.managedResources
    assert go_duration_seconds(fast.httpTimeout) <= 10
    assert go_duration_seconds(bind.httpTimeout) > GANG_WINDOW, "bind must outlast the gang window"
    assert {e.urlPrefix for e in config.extenders} == {fast.urlPrefix}
    # a second scheduler: its own profile and its own lease, never the default scheduler's
    assert [p.schedulerName for p in config.profiles] == ["gang-scheduler"]
    assert config.leaderElection is not None and config.leaderElection.resourceName != "kube-scheduler"


def test_managed_resources_sit_on_an_entry_without_verbs() -> None:
    config = load_v1("managed-resources.yaml")
    managed = [e for e in config.extenders if e.managedResources]
    assert len(managed) == 1
    entry = managed[0]
    assert (entry.filterVerb, entry.prioritizeVerb, entry.preemptVerb, entry.bindVerb) == ("", "", "", "")
    assert all(r.ignoredByScheduler and "/" in r.name for r in entry.managedResources)
    text = (EXAMPLES / "managed-resources.yaml").read_text()
    assert "gang members" in text, "the file carries the warning about gang members"


def test_mutual_tls_example_presents_a_client_certificate() -> None:
    for entry in load_v1("mutual-tls.yaml").extenders:
        assert entry.urlPrefix.startswith("https://") and entry.enableHTTPS
        assert entry.tlsConfig is not None and not entry.tlsConfig.insecure
        assert entry.tlsConfig.caFile and entry.tlsConfig.certFile and entry.tlsConfig.keyFile


def test_legacy_policy_uses_nanoseconds_and_enable_https() -> None:
    policy = load_policy()
    fast, bind = policy.extenders
    assert (fast.filterVerb, fast.prioritizeVerb, fast.preemptVerb, bind.bindVerb) == (
        "filter",
        "prioritize",
        "preempt",
        "bind",
    )
    assert fast.httpTimeout == 5 * 10**9
    assert bind.httpTimeout / 1e9 > GANG_WINDOW
    assert all(e.enableHttps and e.urlPrefix.startswith("https://") and e.tlsConfig for e in policy.extenders)


@pytest.mark.parametrize(
    ("form", "entry"),
    [
        ("v1", {"urlPrefix": "http://x", "enableHttps": True}),  # the legacy spelling in a v1 file
        ("v1", {"urlPrefix": "http://x", "httpTimeout": 5000000000}),  # nanoseconds in a v1 file
        ("v1", {"urlPrefix": "http://x", "httpTimeout": "5 seconds"}),
        ("legacy", {"urlPrefix": "http://x", "enableHTTPS": True}),  # the v1 spelling in a policy file
        ("legacy", {"urlPrefix": "http://x", "httpTimeout": "5s"}),
    ],
)
def test_the_models_refuse_what_kube_scheduler_refuses(form: str, entry: dict[str, object]) -> None:
    model: type[BaseModel] = ExtenderV1 if form == "v1" else LegacyExtender
    with pytest.raises(ValidationError):
        model.model_validate(entry)


def test_the_readme_configuration_uses_only_decodable_fields() -> None:
    readme = (EXAMPLES.parents[1] / "README.md").read_text()
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", readme, flags=re.S) if "KubeSchedulerConfiguration" in b]
    assert blocks
    for block in blocks:
        config = KubeSchedulerConfiguration.model_validate(yaml.safe_load(block))
        assert go_duration_seconds(config.extenders[1].httpTimeout) > GANG_WINDOW
