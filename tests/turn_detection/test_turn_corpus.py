"""The turn corpus: every template has the agent's line said before it."""

from __future__ import annotations

from tests.corpus_script import corpus_module


def test_every_template_has_the_agents_line_before_it() -> None:
    templates = corpus_module().all_templates()
    assert templates and all(t.agent_line.strip() for t in templates)
