"""The held-out checks a learner reads beside the test score: the showcase family (variants of
the Rajesh sentence with other names, cities, times, vehicles and word orders: does the
translation keep every fact, say no content word twice, keep the route in order?) and the
first tries (what a new user types first: is the answer one of the accepted ones?). Both
live in translator/corpus and stay out of every split.

    summary, rows = score_held_out(translate)   # translate: Hindi texts → English texts
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from translator.corpus import read_first_tries, read_showcase_family
from translator.metrics import check_facts, first_try_right


def score_held_out(translate: Callable[[list[str]], list[str]]
                   ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(summary, one row per sentence) of ``translate`` on the showcase family and the first
    tries, hi → en."""
    family, tries = read_showcase_family(), read_first_tries()
    texts = translate([v.hindi for v in family] + [hindi for hindi, _ in tries])
    rows = []
    for variant, text in zip(family, texts):
        check = check_facts(text, variant.facts, variant.english, variant.route)
        rows.append({"set": "family", "source": variant.hindi, "reference": variant.english,
                     "output": text, "missing": check.missing, "repeated": check.repeated,
                     "route_in_order": check.route_in_order, "whole": check.whole})
    for (hindi, accepted), text in zip(tries, texts[len(family):]):
        rows.append({"set": "first_tries", "source": hindi, "accepted": accepted,
                     "output": text, "right": first_try_right(text, accepted)})
    checked = [row for row in rows if row["set"] == "family"]
    facts = sum(len(v.facts) for v in family)
    routes = [row["route_in_order"] for row in checked if row["route_in_order"] is not None]
    summary = {
        "family_sentences": len(checked),
        "family_whole": sum(row["whole"] for row in checked),
        "family_all_facts": sum(not row["missing"] for row in checked),
        "family_facts_kept": round(1 - sum(len(row["missing"]) for row in checked)
                                   / max(1, facts), 4),
        "family_no_repeat": sum(not row["repeated"] for row in checked),
        "family_routes_in_order": f"{sum(routes)} of {len(routes)}",
        "first_tries": len(tries),
        "first_tries_right": sum(row.get("right", False) for row in rows),
    }
    return summary, rows


def describe(summary: dict[str, Any]) -> str:
    """One line for the run's log."""
    return (f"showcase family: {summary['family_whole']} of {summary['family_sentences']} "
            f"with every fact, no repeat and the route in order ({summary['family_facts_kept']:.0%}"
            f" of facts kept); first tries: {summary['first_tries_right']} of "
            f"{summary['first_tries']} right")
