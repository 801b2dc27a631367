-- Fair claiming across groups, and concurrency limits per key (issue 15).
--
-- `fair_group` is the share a job is claimed in: its group, else its
-- concurrency key, else '' (ungrouped jobs, and job types that opt out of
-- fairness, share one group). The claim walks the distinct groups with ready
-- jobs through this index (a skip scan: one probe per group) and takes the top
-- of each group in priority order, so its cost grows with the groups, not
-- with the backlog.
alter table leasehold.jobs add column fair_group text not null default '';
update leasehold.jobs set fair_group = group_key where group_key is not null and status in ('queued', 'running');
create index jobs_fair_ready_idx on leasehold.jobs (queue, fair_group, priority desc, run_at, id)
  where status = 'queued';

-- At most `concurrency_limit` jobs with the same `concurrency_key` run at
-- once, across every runner. Both are set at enqueue, from the job type.
alter table leasehold.jobs add column concurrency_key text;
alter table leasehold.jobs add column concurrency_limit integer;
alter table leasehold.jobs add constraint jobs_concurrency_pair check (
  (concurrency_key is null) = (concurrency_limit is null) and (concurrency_limit is null or concurrency_limit >= 1)
);

-- One row per concurrency key: the runs that hold its slots, as (job id, run
-- number) pairs. Only the claim writes it, under the row's lock: it drops the
-- pairs whose run has ended (the job settled, was released or rescued: its
-- row says so), admits new jobs up to the limit, and appends their runs.
-- Settles and rescues never touch it: a slot frees when the job row leaves
-- `running`, which the next claim reads.
create table leasehold.concurrency_slots (
  key     text primary key,
  job_ids bigint[] not null default '{}',
  runs    integer[] not null default '{}'
);
