-- One plan per statement of due_jobs (docs/internals.md, "Delayed jobs cost a claim nothing").
alter function leasehold.due_jobs(text, text, integer, integer, text[], boolean, boolean, bigint[])
  set plan_cache_mode = force_generic_plan;
