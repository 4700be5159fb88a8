"""simple_elmo's `ElmoModel` at its public path; it lives in
`elmo.integrations.simple_elmo`."""

from elmo.integrations.simple_elmo import (  # noqa: F401
    ElmoModel,
)
