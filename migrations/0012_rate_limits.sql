-- Rate limits per key (issue 20): at most `rate_limit` jobs with the same
-- `rate_key` start in any window of `rate_period_ms`, across every runner.
-- All three are set at enqueue, from the job type (or the enqueue's own key).
alter table leasehold.jobs add column rate_key text;
alter table leasehold.jobs add column rate_limit integer;
alter table leasehold.jobs add column rate_period_ms integer;
alter table leasehold.jobs add constraint jobs_rate_triple check (
  (rate_key is null) = (rate_limit is null) and (rate_key is null) = (rate_period_ms is null)
  and (rate_limit is null or rate_limit >= 1) and (rate_period_ms is null or rate_period_ms >= 1)
);
-- The queued jobs of each key: when a window opens, the scheduler and the
-- runner find whether a key has jobs waiting on it without scanning the queue.
create index jobs_rate_ready_idx on leasehold.jobs (rate_key, queue, run_at)
  where status = 'queued' and rate_key is not null;

-- One row per key: the times of its most recent starts (a claim is a start),
-- oldest first, at most as many as its jobs' limit, none older than
-- `period_ms` when written. Only the claim writes it, under the row's lock
-- (FOR UPDATE SKIP LOCKED): it admits a job while the starts inside the
-- job's period, plus the key's jobs ahead of it in the claim, stay within the
-- job's limit, and appends the admitted starts in the same statement as the
-- jobs, so they cannot disagree. Nothing is charged to a job it turns away.
create table leasehold.rate_windows (
  key       text primary key,
  starts    timestamptz[] not null default '{}',
  period_ms integer not null
);
