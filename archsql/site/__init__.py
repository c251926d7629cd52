"""``archsql site``: a self-contained static site (HTML, JS, data files) built from saved queries.

Pages (:mod:`archsql.site.pages`): the gallery of every model, a model inspector and a
deployment explorer per model, the corpus browser and the design playground;
:mod:`archsql.site.report` writes one model's explorer on one deployment as one file.  Every number on a page is a row of a saved query in
``archsql/queries/`` (or of a named view), and every figure links to that SQL.  The site opens
from ``file://`` with no server: data are ``<script>`` files, charts are Vega-Lite (altair)
drawn by the Vega bundle that vl-convert ships, templates are Jinja2.
"""

from __future__ import annotations

from archsql.site.build import SiteReport, build_site

__all__ = ["SiteReport", "build_site"]
