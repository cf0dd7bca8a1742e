"""``items``: the LangGraph-style items of a store (``sessions_core.items``, what
``langchain_sessions.SessionStore`` keeps), a page at a time, one item's versions, and the
erasure of one item."""

from __future__ import annotations

import json
import sys
from typing import Any

from .._time import to_us
from ..errors import InvalidInputError
from ..items import Items, ItemVersion, StoredItem
from .output import clip, console, emit, format_time, table, text
from .store import BadInput, NotFound, StoreHandle


def _items(handle: StoreHandle, namespace: str) -> Items:
    return Items(handle.open(read_only=True), namespace=namespace)


def _where(path: tuple[str, ...], namespace: str) -> str:
    return f"{'.'.join(path) or 'the root'} (namespace {namespace!r})"


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _item_json(item: StoredItem) -> dict[str, Any]:
    return {
        "namespace": list(item.namespace),
        "key": item.key,
        "version": item.version,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
        "value": item.value,
    }


def _version_json(version: ItemVersion) -> dict[str, Any]:
    return {"version": version.version, "created_at": version.created_at.isoformat(), "value": version.value}


def cmd_items(
    handle: StoreHandle, path: tuple[str, ...], namespace: str, page: int, limit: int, width: int, as_json: bool
) -> None:
    """The items under the namespace path ``path`` (every one when empty), most recently
    updated first, ``limit`` a page."""
    items = _items(handle, namespace)
    try:
        found = items.search(path, limit=limit + 1, offset=(page - 1) * limit)
    except InvalidInputError as error:
        raise BadInput(str(error)) from None
    more, found = len(found) > limit, found[:limit]
    if not found and page > 1:
        first = (page - 1) * limit + 1
        raise BadInput(f"--page {page} is past the end: {_where(path, namespace)} holds fewer than {first:,} items")
    if as_json:
        sys.stdout.write(json.dumps([_item_json(item) for item in found], ensure_ascii=False, indent=2) + "\n")
        return
    out = console()
    if not found:
        out.print(f"No items under {_where(path, namespace)}.")
        return
    grid = table(out, "NAMESPACE", "KEY", "VERSION", "UPDATED", "VALUE", right=("VERSION",))
    for item in found:
        grid.add_row(
            text(".".join(item.namespace), "cyan"),
            text(item.key),
            text(item.version),
            text(format_time(to_us(item.updated_at))),
            text(clip(_value(item.value), width)),
        )
    emit(out, grid)
    first = (page - 1) * limit + 1
    shown = f"items {first:,}-{first + len(found) - 1:,} shown (page {page:,}"
    out.print(shown + (f"; --page {page + 1} for the next {limit:,})" if more else ")"))


def cmd_item_versions(
    handle: StoreHandle, path: tuple[str, ...], key: str, namespace: str, width: int, as_json: bool
) -> None:
    """Every version of the item ``key`` of the namespace path ``path``, newest first (a
    deletion is a version without a value)."""
    if not path:
        raise BadInput("--versions KEY needs the item's namespace path: sessions items LABEL... --versions KEY")
    items = _items(handle, namespace)
    try:
        versions = items.versions(path, key)
    except InvalidInputError as error:
        raise BadInput(str(error)) from None
    if not versions:
        raise NotFound(f"no item {key!r} in {_where(path, namespace)} (see `sessions items`)")
    if as_json:
        sys.stdout.write(json.dumps([_version_json(v) for v in versions], ensure_ascii=False, indent=2) + "\n")
        return
    out = console()
    grid = table(out, "VERSION", "WRITTEN", "VALUE", right=("VERSION",))
    for version in versions:
        shown = "(deleted)" if version.value is None else clip(_value(version.value), width)
        grid.add_row(text(version.version), text(format_time(to_us(version.created_at))), text(shown))
    emit(out, grid)
    out.print(
        f"{len(versions)} version{'' if len(versions) == 1 else 's'} of item {key!r} in {_where(path, namespace)}"
    )


def cmd_erase_item(
    handle: StoreHandle, path: tuple[str, ...], key: str, namespace: str, vacuum: bool, as_json: bool
) -> None:
    """Erase the item ``key`` of the namespace path ``path`` with every version and vector of
    it, and scrub the store's files."""
    if not path:
        raise BadInput("--erase KEY needs the item's namespace path: sessions items LABEL... --erase KEY")
    items = Items(handle.open(), namespace=namespace)
    try:
        result = items.erase(path, key, vacuum=vacuum)
    except InvalidInputError as error:
        raise BadInput(str(error)) from None
    if not result.items:
        raise NotFound(f"no item {key!r} in {_where(path, namespace)} (see `sessions items`)")
    if as_json:
        sys.stdout.write(json.dumps({"erased": key, "items": result.items, "vacuumed": result.vacuumed}) + "\n")
        return
    scrubbed = " and vacuumed the store" if vacuum else ""
    console().print(f"Erased item {key!r} of {_where(path, namespace)} with all its versions{scrubbed}.")
