-- Throughput (attempts ended per minute, `GET /v1/throughput`) reads only
-- the attempts ended in the last hour at most: a range scan on this index,
-- whatever the table's size.
create index job_attempts_ended_idx on leasehold.job_attempts (ended_at);
