"""The web dashboard: pages, a JSON API and live updates over the ledger, the quorum evidence and the audit.

A face, like the CLI: it sits on top of the store and the config and
nothing below imports it. Modules:

* :mod:`.views` — what each page shows, read through the store (plain dicts, also the JSON API);
* :mod:`.timeline` — expected slots from the schedule against the slots the store recorded (pure);
* :mod:`.live` — server-sent events: one watcher of the store fans out to every open page;
* :mod:`.tokens` — admin tokens (trigger, pause, resume), from a file or the environment;
* :mod:`.app` — the Starlette app: routes, sessions, CSRF checks;
* :mod:`.actions` — trigger, pause, resume: the store call each is, and what its answer says;
* :mod:`.probes` — ``/healthz`` (the process) and ``/readyz`` (the store answers, time-bounded);
* :mod:`.inputs` — what a request may carry (query, body, form, origin), checked where it enters;
* :mod:`.present` — templates and their filters, security headers;
* :mod:`.quorum` — the Cluster page's quorum lines (down members, jobs with no quorum), worded as ``status``;
* :mod:`.triggered` — the job page's marks of the slots an operator triggered (``store.triggered``);
* :mod:`.server` — uvicorn, in the foreground or on a thread of the agent.

Needs the ``web`` extra (Starlette, uvicorn, Jinja2). Importing this package
imports none of them; ``quorum_cron.web.app`` and ``.server`` do.

May import: the model, the configuration, the store contract and the shared modules;
never the agent, a command module or redis-py (docs/architecture.md).
"""
