SELECT channel, time_bucket(INTERVAL '1 minute', date_time) AS window_start,
       time_bucket(INTERVAL '1 minute', date_time) + INTERVAL '1 minute' AS window_end,
       count(*) AS bids
FROM 'data/bids.parquet'
GROUP BY ALL
