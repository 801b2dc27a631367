-- A claim reads the due jobs of its queue, not those waiting for later
-- (docs/internals.md, "Delayed jobs cost a claim nothing"): one priority at
-- a time, a probe for the next priority with queued jobs (0, the default,
-- unprobed), then that priority's due jobs, a range of jobs_ready_idx
-- (jobs_fair_ready_idx for a group, jobs_suspect_idx for suspects) that ends
-- at its first job not due; after four priorities the rest in one ordered
-- scan. Planned with sorting off, as the group probes of 0015.
-- `g`, `names`: null for any; `rated`: skip full rate keys (RATE_FULL).
create function leasehold.due_jobs(q text, g text, lim integer, max_lease integer, names text[],
                                   suspects boolean, rated boolean, skip bigint[])
returns table (id bigint, fair_group text, runs integer, concurrency_key text, concurrency_limit integer,
               rate_key text, rate_limit integer, rate_period_ms integer)
language plpgsql volatile rows 100 set enable_sort = off set enable_incremental_sort = off as $$
#variable_conflict use_column
declare
  p integer := 32768;
  lo integer;
  n integer;
  turns integer := 0;
begin
  while lim > 0 and turns < 4 loop
    -- 0 unprobed: its probe would read the just-claimed entries again.
    lo := case when p > 0 then 0 else -32769 end;
    if g is null then
      p := coalesce((select j.priority from leasehold.jobs j
            where j.status = 'queued' and j.queue = q and j.priority < p and j.priority > lo order by j.priority desc limit 1),
            case when lo = 0 then 0 end);
    else
      p := coalesce((select j.priority from leasehold.jobs j
            where j.status = 'queued' and j.queue = q and j.fair_group = g and j.priority < p and j.priority > lo
            order by j.priority desc limit 1),
            case when lo = 0 then 0 end);
    end if;
    if p is null then
      return;
    end if;
    if suspects then
      return query select j.id, j.fair_group, j.runs, j.concurrency_key, j.concurrency_limit, j.rate_key, j.rate_limit, j.rate_period_ms
        from leasehold.jobs j
        where j.status = 'queued' and j.suspect and j.queue = q and j.priority = p and j.run_at <= now()
          and j.lease_ms <= max_lease and (names is null or j.name = any(names))
          and (not rated or j.rate_key is null or not exists (select 1 from leasehold.rate_windows w
                where w.key = j.rate_key and cardinality(w.starts) >= j.rate_limit
                  and w.starts[cardinality(w.starts) - j.rate_limit + 1] > now() - j.rate_period_ms * interval '1 millisecond'))
        order by j.run_at, j.id limit lim for update of j skip locked;
    elsif g is null then
      return query select j.id, j.fair_group, j.runs, j.concurrency_key, j.concurrency_limit, j.rate_key, j.rate_limit, j.rate_period_ms
        from leasehold.jobs j
        where j.status = 'queued' and j.queue = q and not j.suspect and (skip is null or j.id <> all (skip)) and j.priority = p and j.run_at <= now()
          and j.lease_ms <= max_lease and (names is null or j.name = any(names))
          and (not rated or j.rate_key is null or not exists (select 1 from leasehold.rate_windows w
                where w.key = j.rate_key and cardinality(w.starts) >= j.rate_limit
                  and w.starts[cardinality(w.starts) - j.rate_limit + 1] > now() - j.rate_period_ms * interval '1 millisecond'))
        order by j.run_at, j.id limit lim for update of j skip locked;
    else
      return query select j.id, j.fair_group, j.runs, j.concurrency_key, j.concurrency_limit, j.rate_key, j.rate_limit, j.rate_period_ms
        from leasehold.jobs j
        where j.status = 'queued' and j.queue = q and j.fair_group = g and not j.suspect and (skip is null or j.id <> all (skip)) and j.priority = p and j.run_at <= now()
          and j.lease_ms <= max_lease and (names is null or j.name = any(names))
          and (not rated or j.rate_key is null or not exists (select 1 from leasehold.rate_windows w
                where w.key = j.rate_key and cardinality(w.starts) >= j.rate_limit
                  and w.starts[cardinality(w.starts) - j.rate_limit + 1] > now() - j.rate_period_ms * interval '1 millisecond'))
        order by j.run_at, j.id limit lim for update of j skip locked;
    end if;
    get diagnostics n = row_count;
    lim := lim - n;
    turns := turns + 1;
  end loop;
  if lim <= 0 then
    return;
  end if;
  -- The priorities below the fourth, in one ordered scan.
  if suspects then
      return query select j.id, j.fair_group, j.runs, j.concurrency_key, j.concurrency_limit, j.rate_key, j.rate_limit, j.rate_period_ms
        from leasehold.jobs j
        where j.status = 'queued' and j.suspect and j.queue = q and j.priority < p and j.run_at <= now()
          and j.lease_ms <= max_lease and (names is null or j.name = any(names))
          and (not rated or j.rate_key is null or not exists (select 1 from leasehold.rate_windows w
                where w.key = j.rate_key and cardinality(w.starts) >= j.rate_limit
                  and w.starts[cardinality(w.starts) - j.rate_limit + 1] > now() - j.rate_period_ms * interval '1 millisecond'))
        order by j.priority desc, j.run_at, j.id limit lim for update of j skip locked;
  elsif g is null then
      return query select j.id, j.fair_group, j.runs, j.concurrency_key, j.concurrency_limit, j.rate_key, j.rate_limit, j.rate_period_ms
        from leasehold.jobs j
        where j.status = 'queued' and j.queue = q and not j.suspect and (skip is null or j.id <> all (skip)) and j.priority < p and j.run_at <= now()
          and j.lease_ms <= max_lease and (names is null or j.name = any(names))
          and (not rated or j.rate_key is null or not exists (select 1 from leasehold.rate_windows w
                where w.key = j.rate_key and cardinality(w.starts) >= j.rate_limit
                  and w.starts[cardinality(w.starts) - j.rate_limit + 1] > now() - j.rate_period_ms * interval '1 millisecond'))
        order by j.priority desc, j.run_at, j.id limit lim for update of j skip locked;
  else
      return query select j.id, j.fair_group, j.runs, j.concurrency_key, j.concurrency_limit, j.rate_key, j.rate_limit, j.rate_period_ms
        from leasehold.jobs j
        where j.status = 'queued' and j.queue = q and j.fair_group = g and not j.suspect and (skip is null or j.id <> all (skip)) and j.priority < p and j.run_at <= now()
          and j.lease_ms <= max_lease and (names is null or j.name = any(names))
          and (not rated or j.rate_key is null or not exists (select 1 from leasehold.rate_windows w
                where w.key = j.rate_key and cardinality(w.starts) >= j.rate_limit
                  and w.starts[cardinality(w.starts) - j.rate_limit + 1] > now() - j.rate_period_ms * interval '1 millisecond'))
        order by j.priority desc, j.run_at, j.id limit lim for update of j skip locked;
  end if;
end $$;
