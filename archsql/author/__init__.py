"""Spec authoring: a facts bundle (:mod:`~archsql.author.facts`), guards with error codes
(:mod:`~archsql.author.guards`), a prompt assembled from data (:mod:`~archsql.author.prompt`),
an agent loop with pluggable backends and ``promote`` (:mod:`~archsql.author.loop`); commands in
:mod:`archsql.author.cli`.  See docs/authoring.md."""
