-- stores.storage: vector or halfvec index

-- halfvec stores index embedding::halfvec(dim) with halfvec_cosine_ops: half the index size.
ALTER TABLE stores ADD COLUMN storage text NOT NULL DEFAULT 'vector'
    CHECK (storage IN ('vector', 'halfvec'));
