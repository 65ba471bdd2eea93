"""Small jobs for the command-line tests: the issue's job over 20,000 Nexmark events."""
from jobs import bids_over_nexmark, issue_job_over_nexmark

BIDS = bids_over_nexmark(20000)
ISSUE_JOB = issue_job_over_nexmark(20000)
