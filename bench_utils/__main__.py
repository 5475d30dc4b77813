import sys

sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # jsonschema's IRI grammar: as in kernel.py
from .cli import main  # noqa: E402

raise SystemExit(main())
