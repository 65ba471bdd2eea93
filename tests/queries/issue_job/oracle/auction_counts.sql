SELECT auction, time_bucket(INTERVAL '10 seconds', date_time) AS window_start,
       time_bucket(INTERVAL '10 seconds', date_time) + INTERVAL '10 seconds' AS window_end,
       count(*) AS bids, sum(price) AS total, max(price) AS top
FROM 'data/bids.parquet'
GROUP BY ALL
