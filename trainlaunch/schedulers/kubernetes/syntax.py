"""The API server's syntax rules for names, label keys and values, quantities and ports."""

from __future__ import annotations

import re

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_PORT_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_QUANTITY = re.compile(
    r"^([0-9]+(\.[0-9]+)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][-+]?[0-9]+)?$"
)


def is_dns_label(text: str) -> bool:
    """RFC 1123 label: <= 63 lower-case letters, digits and '-', alphanumeric at both ends."""
    return isinstance(text, str) and len(text) <= 63 and bool(_DNS_LABEL.match(text))


def is_dns_subdomain(text: str) -> bool:
    """RFC 1123 subdomain: dot-separated labels, <= 253 characters."""
    return isinstance(text, str) and len(text) <= 253 and bool(_DNS_SUBDOMAIN.match(text))


def is_qualified_name(key: str) -> bool:
    """A label or annotation key: ``[prefix/]name`` with a DNS-subdomain prefix."""
    if not isinstance(key, str):
        return False
    prefix, sep, name = key.rpartition("/")
    if sep and not is_dns_subdomain(prefix):
        return False
    return len(name) <= 63 and bool(_QUALIFIED.match(name))


def is_label_value(value: object) -> bool:
    """A label value: empty, or <= 63 characters, alphanumeric at both ends."""
    return isinstance(value, str) and (
        value == "" or (len(value) <= 63 and bool(_QUALIFIED.match(value)))
    )


def is_quantity(text: object) -> bool:
    """A resource quantity such as 500m, 2, 16Gi or 1e3."""
    return isinstance(text, str) and bool(_QUANTITY.match(text))


def is_port_name(name: str) -> bool:
    """IANA service name: <= 15 characters, at least one letter, no '--'."""
    return (
        isinstance(name, str)
        and len(name) <= 15
        and bool(_PORT_NAME.match(name))
        and "--" not in name
        and any(ch.isalpha() for ch in name)
    )


def is_dns_1035(text: str) -> bool:
    """RFC 1035 label (Service names): an RFC 1123 label that starts with a letter."""
    return isinstance(text, str) and len(text) <= 63 and bool(DNS_1035.match(text))
