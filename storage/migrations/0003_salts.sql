-- The collector's daily salts for visitor_id / ip_hash. Kept in the store so that every
-- collector instance and every restart hashes alike; old salts are deleted so that hashes
-- from different days cannot be linked back together.
CREATE TABLE IF NOT EXISTS salts
(
    day        Date,
    salt       String,
    created_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = MergeTree
ORDER BY (day, salt);
