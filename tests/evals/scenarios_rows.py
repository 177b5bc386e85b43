"""Eval scenarios decided by the current turn's rows: excerpts pasted loosely, tables that
only look like excerpts, several groups, secrets and derived requests
(docs/contract/decision.md steps 5-8)."""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta
from typing import Any

from .builders import (
    Case,
    Group,
    alarm_events,
    csv_lines,
    grouped,
    half_up,
    instances,
    pack_status,
    page,
    pipe_table,
    sites,
    telemetry,
    tsv_lines,
)
from .talk import DONE, ask, history_call


# --- excerpts pasted loosely, and tables that only look like excerpts (docs/contract/decision.md st
def show_time(stamp: str, style: str) -> str:
    day, clock = stamp[:10], stamp[11:19]
    if style == "space_minutes":
        return f"{day} {clock[:5]}"
    if style == "space_seconds":
        return f"{day} {clock}"
    if style == "offset":
        hour = int(clock[:2]) + 2  # generated data stays before 22:00
        return f"{day}T{hour:02d}{clock[2:5]}+02:00"
    if style == "t_minutes_z":
        return f"{day}T{clock[:5]}Z"
    return stamp


def show_value(value: float, unit: str, style: str) -> str:
    if style == "round2":
        return half_up(value, 2)
    if style == "round2_unit":
        return f"{half_up(value, 2)} {unit}"
    if style == "round1_unit_tight":
        return f"{half_up(value, 1)}{unit}"
    if style == "round3":
        return half_up(value, 3)
    return repr(value)


def render(style: str, header: list[str], rows: list[list[str]]) -> str:
    if style == "pipe":
        return pipe_table(header, rows)
    if style == "tsv":
        return tsv_lines(header, rows)
    body = csv_lines(header, rows)
    if style == "fenced":
        return f"```csv\n{body}\n```"
    if style == "text_csv":
        return f"```text/csv\n{body}\n```"
    return body


def telemetry_excerpt(
    rng: random.Random, rows: list[dict[str, Any]], *, off: str | None = None
) -> tuple[list[str], list[list[str]]]:
    """A pasted sample of telemetry rows: reformatted times, rounded values, units, elisions."""
    time_style = rng.choice(["iso", "space_minutes", "space_seconds", "offset", "t_minutes_z"])
    value_style = rng.choice(["exact", "round2", "round2_unit", "round1_unit_tight", "round3"])
    unit = rows[0]["unit"]
    with_parameter = rng.random() < 0.5
    header = [rng.choice(["timestamp", "Timestamp", "TIMESTAMP"])]
    header += ["Parameter"] if with_parameter else []
    header += [rng.choice([f"Value ({unit})", "value", f"value [{unit}]"])]
    picks = sorted(rng.sample(range(len(rows)), rng.randint(2, 4)))
    table = []
    for index in picks:
        row = rows[index]
        cells = [show_time(row["timestamp"], time_style)]
        if with_parameter:
            cells.append(rng.choice([row["parameter"], row["parameter"].lower()]))
        cells.append(show_value(row["value"], unit, value_style))
        table.append(cells)
    if rng.random() < 0.6:
        table.insert(rng.randint(1, len(table)), [rng.choice(["…", "..."])] * len(header))
    if off == "value":
        table[0][-1] = half_up(rows[picks[0]]["value"] + 0.05, 2)
    elif off == "time":
        table[0][0] = show_time(rows[picks[0]]["timestamp"][:14] + "59:59Z", "iso")
    elif off == "column":
        header.append("Delta")
        for cells in table:
            cells.append("0.00" if cells[0] not in ("…", "...") else cells[0])
    return header, table


def alarm_excerpt(
    rng: random.Random, rows: list[dict[str, Any]], *, off: str | None = None
) -> tuple[list[str], list[list[str]]]:
    """A pasted sample of alarm events: grouped counts, yes/no flags, case changes."""
    separator = rng.choice([",", " ", "_"])
    header = ["Event ID", "Raised at", "Severity", "Occurrences", "Acknowledged"]
    table = []
    for row in rng.sample(rows, 3):
        flag = ("yes" if row["acknowledged"] else "no") if off != "flag" else "on"
        table.append(
            [
                row["event_id"].lower(),
                show_time(row["raised_at"], "space_minutes"),
                row["severity"].upper(),
                grouped(row["occurrences"], separator),
                flag,
            ]
        )
    return header, table


def status_excerpt(
    rng: random.Random, rows: list[dict[str, Any]], *, off: str | None = None
) -> tuple[list[str], list[list[str]]]:
    """A pasted sample of pack status: seconds cut from milliseconds, %, °C, Yes/No."""
    header = ["Sampled at", "Pack", "Charge (%)", "Cell temp (°C)", "Balancing"]
    late = [r for r in rows if int(r["sampled_at"][17:19]) >= 30]
    picks = rng.sample(late if off == "rounded_time" else rows, 3)
    table = []
    for row in sorted(picks, key=lambda r: r["sampled_at"]):
        stamp = row["sampled_at"]
        if off == "rounded_time":  # rounded to the minute where the contract cuts: not the instant
            at = datetime.fromisoformat(stamp.replace("Z", "+00:00")) + timedelta(minutes=1)
            shown = at.strftime("%Y-%m-%d %H:%M")
        else:
            shown = rng.choice([f"{stamp[:10]} {stamp[11:19]}", f"{stamp[:10]} {stamp[11:16]}"])
        table.append(
            [
                shown,
                row["pack"].lower(),
                rng.choice([f"{row['charge']}%", f"{row['charge']} %"]),
                rng.choice(
                    [f"{half_up(row['cell_temp'], 1)} °C", f"{half_up(row['cell_temp'], 2)}°C"]
                ),
                "Yes" if row["balancing"] else "No",
            ]
        )
    return header, table


def excerpt_case(case: Case, rng: random.Random, *, off: str | None = None) -> None:
    fmt = rng.choice(["csv", "json", "xml", "xlsx"])
    style = rng.choice(["pipe", "fenced", "text_csv", "unfenced", "tsv"])
    case.user(f"Retrieve the data. {ask(rng, fmt)}")
    groups: list[Group] = []
    kind = (
        rng.choice(["alarms", "status", "telemetry"])
        if off is None
        else {"flag": "alarms", "rounded_time": "status"}.get(off, "telemetry")
    )
    if kind == "alarms":
        data = alarm_events(rng.randint(25, 80), seed=case.number)
        groups = case.tools(("list_alarm_events", {"subsystem": "EPS"}, {"items": data}))
        header, table = alarm_excerpt(rng, data, off=off)
    elif kind == "status":
        data = pack_status(rng.randint(30, 90), seed=case.number)
        groups = case.tools(
            ("get_pack_status", {"fleet": "all"}, {"items": data, "count": len(data)})
        )
        header, table = status_excerpt(rng, data, off=off)
    else:
        lookups = case.tools(("list_instances", {"name_filter": "sat-07"}, instances(["sat-07"])))
        data = telemetry("BatteryVoltage1", rng.choice([60, 120, 450]), seed=case.number)
        size = 30 if len(data) <= 60 else 60
        pages = range(1, math.ceil(len(data) / size) + 1)
        groups = case.tools(*(history_call("BatteryVoltage1", data, n, size) for n in pages))
        header, table = telemetry_excerpt(rng, data, off=off)
        assert lookups
    intro = rng.choice(["Here is a sample:", "The first rows look like this:", "Preview:"])
    case.reply(f"{intro}\n\n{render(style, header, table)}\n\nThe full file is attached.")
    case.event()
    shown = [r for r in table if r[0] not in ("…", "...")]
    if off is None:
        merged = Group(groups[0].action, [a for g in groups for a in g.artifacts], len(data))
        case.expect(
            "published",
            fmt,
            source="action_rows",
            rule="excerpt_replaced",
            rows=len(data),
            groups=[merged],
        )
    else:
        case.expect(
            "published", fmt, source="assistant_table", rule="assistant_table", rows=len(shown)
        )


def hourly_means(case: Case, rng: random.Random) -> None:
    """A composed table whose header and values are in no action row."""
    fmt = rng.choice(["csv", "xml"])
    data = telemetry("BatteryVoltage1", 120, seed=case.number)
    case.user(f"get the BatteryVoltage1 history and {ask(rng, fmt)}")
    case.tools(history_call("BatteryVoltage1", data, 1, 120))
    table = pipe_table(["Hour", "Value (V)"], [["00:00", "12.43 V"], ["01:00", "12.47 V"]])
    case.reply(f"Hourly view:\n\n{table}")
    case.event()
    case.expect("published", fmt, source="assistant_table", rule="assistant_table", rows=2)


def whole_small_dataset(case: Case, rng: random.Random) -> None:
    """A table as long as the action rows is not an excerpt (strictly fewer rows needed)."""
    data = sites(["Kiruna", "Svalbard", "Troll"])
    case.user(ask(rng, "json"))
    case.tools(("list_sites", {}, data))
    rows = [[r["site_id"], r["name"], r["country"]] for r in data]
    case.reply(pipe_table(["site_id", "name", "country"], rows))
    case.event()
    case.expect("published", "json", source="assistant_table", rule="assistant_table", rows=3)


# --- several groups in the turn (decision.md step 7, dominance) and derived requests (step 5) ---
def dominant(case: Case, rng: random.Random) -> None:
    fmt = rng.choice(["csv", "json"])
    case.user(f"Retrieve the BatteryVoltage1 history for instance sat-07 and {ask(rng, fmt)}")
    case.tools(
        ("list_instances", {"name_filter": "sat-07"}, instances(["sat-07"])),
        ("list_parameters", {"instance_id": "sat-07"}, [{"parameter": "BatteryVoltage1"}]),
    )
    data = telemetry("BatteryVoltage1", 900, seed=case.number)
    groups = case.tools(*(history_call("BatteryVoltage1", data, n, 450) for n in (1, 2)))
    case.reply(rng.choice(DONE))
    case.event()
    merged = Group("list_parameter_history", [a for g in groups for a in g.artifacts], 900)
    case.expect("published", fmt, source="action_rows", rule="dominant", rows=900, groups=[merged])


def combined(case: Case, rng: random.Random, sizes: tuple[int, int]) -> None:
    case.user(f"List the instances and the ground sites and {ask(rng, 'csv')}")
    names = ["sat-03", "sat-05", "sat-07", "sat-09", "sat-11", "sat-12", "sat-14"]
    site_names = ["Kiruna", "Svalbard", "Troll", "Inuvik", "Santiago", "Perth", "Hawaii"]
    first = instances(names[: sizes[0]])
    second = sites((site_names * 3)[: sizes[1]])
    for i, row in enumerate(second):
        row["site_id"] = f"S{i:02d}"
    groups = case.tools(("list_instances", {}, first), ("list_sites", {}, second))
    case.reply(rng.choice(DONE))
    case.event()
    total = sum(sizes)
    if sizes[1] >= 10 and sizes[1] >= 5 * sizes[0]:
        case.expect(
            "published",
            "csv",
            source="action_rows",
            rule="dominant",
            rows=sizes[1],
            groups=[groups[1]],
        )
    else:
        case.expect(
            "published", "csv", source="action_rows", rule="combined", rows=total, groups=groups
        )


def dedup_pages(case: Case, rng: random.Random) -> None:
    """A row repeated from an earlier page of the same action is dropped."""
    data = telemetry("SolarArrayPower", 100, base=410.0, spread=40.0, seed=case.number)
    fmt = rng.choice(["json", "xml"])
    case.user(f"export the SolarArrayPower history as {fmt}")
    first = {**page(data, 1, 50), "items": data[:50]}
    second = {**page(data, 2, 50), "items": data[47:100]}  # repeats the last 3 of page 1
    groups = case.tools(
        ("list_parameter_history", {"page": 1}, first),
        ("list_parameter_history", {"page": 2}, second),
    )
    case.reply(rng.choice(DONE))
    case.event()
    merged = Group("list_parameter_history", [a for g in groups for a in g.artifacts], 100)
    case.expect(
        "published", fmt, source="action_rows", rule="single_group", rows=100, groups=[merged]
    )


def secrets(case: Case, rng: random.Random) -> None:
    """Keys naming secrets are dropped at any depth (docs/contract/decision.md step 8)."""
    rows = [
        {
            "account": f"acct-{i}",
            "region": "westeurope",
            "AccessKey": "AKIA-not-real",
            "storage": {"accountKey": "k==", "tier": "hot", "SharedAccessSignature": "sv=x"},
            "subscription_key": "s",
            "private_key_pem": "-----BEGIN",
        }
        for i in range(12)
    ]
    case.user(ask(rng, "json"))
    [group] = case.tools(("list_storage_accounts", {}, rows))
    case.reply(rng.choice(DONE))
    case.event()
    case.expect(
        "published",
        "json",
        source="action_rows",
        rule="single_group",
        rows=12,
        groups=[group],
        columns=["account", "region", "storage"],
    )


def derived(case: Case, rng: random.Random, with_table: bool) -> None:
    data = telemetry("BatteryVoltage1", 120, seed=case.number)
    text = rng.choice(
        [
            "calculate the hourly average and create a csv",
            "summarize the voltages per hour as json",
            "sorted by value, export to xml",
            "only the timestamp and value columns as csv",
        ]
    )
    fmt = next(f for f in ("csv", "json", "xml") if f in text)
    case.user(text)
    case.tools(history_call("BatteryVoltage1", data, 1, 120))
    if with_table:
        rows = [[r["timestamp"], str(r["value"])] for r in data[:3]]
        case.reply("Result:\n\n" + pipe_table(["timestamp", "value"], rows))
        case.event()
        case.expect("published", fmt, source="assistant_table", rule="assistant_table", rows=3)
    else:
        case.reply("The average is 12.85 V.")
        case.event()
        case.expect("derived_output_without_table", fmt)


def log_query(case: Case, rng: random.Random) -> None:
    """A query service's columnar answer (Log Analytics' tables of columns and rows): each
    list of values is one row, keyed by the column names."""
    fmt = rng.choice(["csv", "json", "xml", "xlsx"])
    data = telemetry("BatteryVoltage1", rng.choice([120, 450]), seed=case.number)
    names = list(data[0])
    result = {
        "tables": [
            {
                "name": "PrimaryResult",
                "columns": [{"name": name, "type": "string"} for name in names],
                "rows": [[item[name] for name in names] for item in data],
            }
        ]
    }
    case.user(f"Query the BatteryVoltage1 samples of sat-07. {ask(rng, fmt)}")
    query = "Telemetry | where parameter == 'BatteryVoltage1' and instance_id == 'sat-07'"
    groups = case.tools(("query_logs", {"query": query}, result))
    header, table = telemetry_excerpt(rng, data)
    style = rng.choice(["pipe", "fenced", "unfenced"])
    case.reply(
        f"The query returned {len(data)} samples, the first:\n\n{render(style, header, table)}"
    )
    case.event()
    _expect_excerpt_replaced(case, fmt, len(data), groups)


def null_and_cut_excerpt(case: Case, rng: random.Random) -> None:
    """An excerpt showing a null as a dash, null or N/A, and long messages cut with an
    ellipsis: it still shows only retrieved rows."""
    fmt = rng.choice(["csv", "json", "xml", "xlsx"])
    start = datetime(2026, 11, 19, 6, 0)
    data = [
        {
            "event_id": f"EV-{5200 + i}",
            "raised_at": (start + timedelta(minutes=17 * i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "message": f"Battery pack {i % 4 + 1} voltage below threshold on bus {i % 3 + 1}",
            "cleared_at": None
            if i % 3 == 0
            else (start + timedelta(minutes=17 * i + 9)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        for i in range(rng.randint(30, 70))
    ]
    case.user(f"List the battery alarms. {ask(rng, fmt)}")
    groups = case.tools(("list_alarm_events", {"subsystem": "EPS"}, {"items": data}))
    marker = rng.choice(["—", "-", "N/A", "null", "None"])
    ellipsis = rng.choice(["…", "..."])
    picks = sorted(rng.sample(range(0, len(data), 3), 1) + rng.sample(range(1, len(data), 3), 2))
    table = []
    for index in picks:
        row = data[index]
        cut = rng.randint(14, 30)
        cleared = row["cleared_at"]
        table.append(
            [
                row["event_id"],
                show_time(row["raised_at"], "space_minutes"),
                row["message"][:cut].rstrip() + ellipsis,
                marker if cleared is None else show_time(cleared, "space_minutes"),
            ]
        )
    header = ["Event ID", "Raised at", "Message", "Cleared at"]
    case.reply(f"Open and cleared alarms, the first few:\n\n{pipe_table(header, table)}")
    case.event()
    _expect_excerpt_replaced(case, fmt, len(data), groups)


def lookup_excerpt(case: Case, rng: random.Random) -> None:
    """The reply shows what a discovery call found (an excerpt of the lookup's rows, not a
    table the model composed): the dominant history is exported, not the lookup."""
    fmt = rng.choice(["csv", "json", "xml", "xlsx"])
    names = ["sat-07", "sat-08", "sat-11"]
    case.user(f"Retrieve the BatteryVoltage1 history for instance sat-07 and {ask(rng, fmt)}")
    case.tools(("list_instances", {"name_filter": "sat"}, instances(names)))
    data = telemetry("BatteryVoltage1", 900, seed=case.number)
    groups = case.tools(*(history_call("BatteryVoltage1", data, n, 450) for n in (1, 2)))
    found = instances(names)["items"][0]
    header = rng.choice([["Instance ID", "Name"], ["instance_id", "name", "status"]])
    cells = [found["instance_id"], found["name"], found["status"]][: len(header)]
    style = rng.choice(["pipe", "fenced", "unfenced"])
    case.reply(
        f"I found the instance:\n\n{render(style, header, [cells])}\n\n"
        "and retrieved its 900 BatteryVoltage1 samples."
    )
    case.event()
    merged = Group("list_parameter_history", [a for g in groups for a in g.artifacts], 900)
    _expect_excerpt_replaced(case, fmt, 900, [merged])


def _expect_excerpt_replaced(case: Case, fmt: str, rows: int, groups: list[Group]) -> None:
    """The reply's table was an excerpt: the action rows of `groups` are published."""
    case.expect(
        "published", fmt, source="action_rows", rule="excerpt_replaced", rows=rows, groups=groups
    )
