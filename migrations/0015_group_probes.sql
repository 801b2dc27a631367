-- The fair claim's probes of jobs_fair_ready_idx, as functions: the first
-- group of a queue's queued jobs at or after a group, after it, and the last
-- before it. Each is planned with sorting off, so its one plan is the ordered
-- scan of jobs_fair_ready_idx: one probe, whatever the backlog.
--
-- Written inline in the claim, a probe was planned from the table's
-- statistics. When those were taken while the queue was nearly empty (a
-- burst drained before autovacuum analyzes the table, the common case for a
-- queue), the planner expected one queued row, and scanned jobs_ready_idx
-- and sorted what it found: every queued job of the queue, read twice by
-- every claim of a fair queue with one group (issue 24: 83 index tuples read
-- a job, 37 µs of Postgres CPU a job against 26 once analyzed).
create function leasehold.fair_group_from(q text, g text) returns text
language plpgsql stable set enable_sort = off as $$
begin
  return (select j.fair_group from leasehold.jobs j
          where j.status = 'queued' and j.queue = q and j.fair_group >= g order by j.fair_group limit 1);
end $$;

create function leasehold.fair_group_after(q text, g text) returns text
language plpgsql stable set enable_sort = off as $$
begin
  return (select j.fair_group from leasehold.jobs j
          where j.status = 'queued' and j.queue = q and j.fair_group > g order by j.fair_group limit 1);
end $$;

create function leasehold.fair_group_before(q text, g text) returns text
language plpgsql stable set enable_sort = off as $$
begin
  return (select j.fair_group from leasehold.jobs j
          where j.status = 'queued' and j.queue = q and j.fair_group < g order by j.fair_group desc limit 1);
end $$;
