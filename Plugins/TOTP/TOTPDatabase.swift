public import KeywayCore

/// TOTP's part of a fleet's database (docs/ARCHITECTURE.md §17): a TOTP is checked inside the database, where its
/// secret stays, so the factor ships the SQL that checks it, and `keyway store migrate` composes it into the
/// schema's migrations by version (`DatabaseSchema`). The fleet's store calls the two functions a one-time code needs
/// (`Store.reserveOneTimeCode`: keyway_reserve_code; `Store.checkOneTimeCode`: keyway_check_code).
enum TOTPDatabase {
    /// The part: what migrations 2 and 4 add for TOTP, and what a host's role is granted of it. Computed, as the
    /// module's statics must be when they allocate (docs/ARCHITECTURE.md §8): libpam loads the module again for
    /// every transaction, so a stored dictionary or built string would be lost at each unload.
    static var schema: DatabaseSchema {
        DatabaseSchema(
            migrations: [2: version2, 4: version4],
            hostFunctions: [
                "keyway_reserve_code(text, text, text, boolean)",
                "keyway_check_code(text, text, text, integer, boolean)",
            ],
            tables: ["code_budgets", "code_reservations", "code_marks"])
    }

    /// Migration 2: a TOTP's secret sealed (a host reads its 3-byte header: version, digits, period), and checked by
    /// the database. (Replaced in migration 4.)
    static var version2: String {
        """
        INSERT INTO sealed VALUES ('totp', 3);
        CREATE TABLE code_checks (
            account text COLLATE "C" NOT NULL,
            factor text COLLATE "C" NOT NULL,
            step bigint NOT NULL,
            checks integer NOT NULL,
            PRIMARY KEY (account, factor)
        );

        -- A one-time code (RFC 6238) checked here, with the secret that never leaves the database, by the
        -- database's clock: the step that matched within p_window either side, and the code's fingerprint as a
        -- wrong one. At most 16 checks per account and factor in one step, from all hosts together, so a host
        -- cannot use this to search for a code.
        CREATE FUNCTION keyway_check_code(p_account text, p_factor text, p_code text, p_window integer)
            RETURNS TABLE (step bigint, fingerprint bytea)
            LANGUAGE plpgsql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
        DECLARE
            record bytea;
            header integer;
            digits integer;
            key bytea;
            now_step bigint;
            candidate bigint;
            mac bytea;
            place integer;
            binary_code bigint;
            matched bigint;
            checked integer;
        BEGIN
            SELECT e.payload, s.header INTO record, header
            FROM enrollments e JOIN sealed s ON s.factor = e.factor
            WHERE e.account = p_account AND e.factor = p_factor;
            IF NOT FOUND THEN RETURN; END IF;
            IF length(record) <= header OR get_byte(record, 0) <> 1 OR get_byte(record, 2) = 0 THEN
                RAISE EXCEPTION 'the stored % of % is not a version-1 record', p_factor, p_account;
            END IF;
            IF p_window < 0 OR p_window > 10 THEN
                RAISE EXCEPTION 'a window of % steps is refused (0 to 10)', p_window;
            END IF;
            digits := get_byte(record, 1);
            key := substring(record FROM header + 1);
            now_step := floor(extract(epoch FROM clock_timestamp()) / get_byte(record, 2))::bigint;
            INSERT INTO code_checks AS c VALUES (p_account, p_factor, now_step, 1)
            ON CONFLICT (account, factor) DO UPDATE
                SET checks = CASE WHEN c.step = excluded.step THEN c.checks + 1 ELSE 1 END, step = excluded.step
            RETURNING c.checks INTO checked;
            IF checked > 16 THEN
                RAISE EXCEPTION 'more than 16 codes of % of % checked in one step', p_factor, p_account
                    USING ERRCODE = '42501';
            END IF;
            FOR candidate IN now_step - p_window .. now_step + p_window LOOP
                mac := hmac(int8send(candidate::bigint), key, 'sha1');
                place := get_byte(mac, 19) & 15;
                -- (PostgreSQL gives & << | one precedence, left to right: each term is bracketed.)
                binary_code := ((get_byte(mac, place) & 127)::bigint << 24) | (get_byte(mac, place + 1)::bigint << 16)
                    | (get_byte(mac, place + 2)::bigint << 8) | get_byte(mac, place + 3)::bigint;
                IF matched IS NULL
                    AND lpad((binary_code % (10 ^ digits)::bigint)::text, digits, '0') = p_code
                THEN
                    matched := candidate;
                END IF;
            END LOOP;
            RETURN QUERY SELECT matched, substring(hmac(convert_to('mismatch', 'UTF8') || int8send(now_step)
                || convert_to(p_code, 'UTF8'), key, 'sha1') FROM 1 FOR 16);
        END $$;

        REVOKE ALL ON FUNCTION keyway_check_code(text, text, text, integer) FROM PUBLIC;
        """
    }

    /// Migration 4: a code booked in a transaction of its own before it is checked, a budget per role and
    /// channel, the window the database's, and the step of each accepted code marked by the database.
    static var version4: String {
        """
        ALTER TABLE sealed ADD COLUMN code_window integer NOT NULL DEFAULT 1 CHECK (code_window BETWEEN 0 AND 10);
        CREATE TABLE code_budgets (
            account text COLLATE "C" NOT NULL,
            factor text COLLATE "C" NOT NULL,
            role text NOT NULL,
            channel text NOT NULL,
            step bigint NOT NULL,
            spent integer NOT NULL,
            PRIMARY KEY (account, factor, role, channel)
        );
        CREATE TABLE code_reservations (
            id bigserial PRIMARY KEY,
            account text COLLATE "C" NOT NULL,
            factor text COLLATE "C" NOT NULL,
            role text NOT NULL,
            channel text NOT NULL,
            step bigint NOT NULL,
            code text NOT NULL,
            made_in xid8 NOT NULL,
            checked boolean NOT NULL DEFAULT false
        );
        CREATE INDEX code_reservations_by_account ON code_reservations (account, factor, role, channel, step);
        -- The step of the last code accepted, for the enrollment made at changed_at (a new secret starts over).
        CREATE TABLE code_marks (
            account text COLLATE "C" NOT NULL,
            factor text COLLATE "C" NOT NULL,
            step bigint NOT NULL,
            changed_at bigint NOT NULL,
            PRIMARY KEY (account, factor)
        );
        INSERT INTO code_marks
            SELECT a.account, a.factor, floor(a.last_success / 1000.0 / get_byte(e.payload, 2))::bigint, e.changed_at
            FROM attempts a JOIN enrollments e ON e.account = a.account AND e.factor = a.factor
                JOIN sealed s ON s.factor = a.factor
            WHERE a.last_success IS NOT NULL AND length(e.payload) > 2 AND get_byte(e.payload, 2) > 0;

        -- The step a one-time code of p_factor of p_account is judged in now, with the record it is judged by; nothing
        -- when there is no such enrollment.
        CREATE FUNCTION keyway_code_record(p_account text, p_factor text,
            OUT record bytea, OUT header integer, OUT code_window integer, OUT changed_at bigint, OUT now_step bigint)
            LANGUAGE plpgsql STABLE SET search_path = @schema, pg_temp AS $$
        BEGIN
            SELECT e.payload, s.header, s.code_window, e.changed_at INTO record, header, code_window, changed_at
            FROM enrollments e JOIN sealed s ON s.factor = e.factor
            WHERE e.account = p_account AND e.factor = p_factor;
            IF NOT FOUND THEN RETURN; END IF;
            IF length(record) <= header OR get_byte(record, 0) <> 1 OR get_byte(record, 2) = 0 THEN
                RAISE EXCEPTION 'the stored % of % is not a version-1 record', p_factor, p_account;
            END IF;
            now_step := floor(extract(epoch FROM clock_timestamp()) / get_byte(record, 2))::bigint;
        END $$;

        -- Books the check of one code, in its own transaction, which the caller must commit before the check
        -- (keyway_check_code): the count is then beyond the caller's reach. At most 8 codes that did not match per
        -- account, role and channel in one step: a stranger through one host's sshd, or root on another host, does
        -- not spend what the console has. False when there is no such enrollment; the budget spent is refused with
        -- SQLSTATE KWB01 and books nothing.
        CREATE FUNCTION keyway_reserve_code(p_account text, p_factor text, p_code text, p_remote boolean)
            RETURNS boolean
            LANGUAGE plpgsql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
        DECLARE
            judged record;
            v_channel text := CASE WHEN p_remote THEN 'remote' ELSE 'local' END;
            v_spent integer;
        BEGIN
            SELECT * INTO judged FROM keyway_code_record(p_account, p_factor);
            IF judged.record IS NULL THEN RETURN false; END IF;
            IF p_code !~ '^[0-9]{6,10}$' THEN
                RAISE EXCEPTION 'a code is 6 to 10 digits' USING ERRCODE = '22023';
            END IF;
            INSERT INTO code_budgets AS b VALUES (p_account, p_factor, session_user, v_channel, judged.now_step, 1)
            ON CONFLICT (account, factor, role, channel) DO UPDATE
                SET spent = CASE WHEN b.step = excluded.step THEN b.spent + 1 ELSE 1 END, step = excluded.step
            RETURNING b.spent INTO v_spent;
            IF v_spent > 8 THEN
                RAISE EXCEPTION '8 wrong codes of % of % from % (%) in this step; the next step has its own',
                    p_factor, p_account, session_user, v_channel USING ERRCODE = 'KWB01';
            END IF;
            DELETE FROM code_reservations WHERE account = p_account AND factor = p_factor
                AND step < judged.now_step - 1;
            INSERT INTO code_reservations (account, factor, role, channel, step, code, made_in)
            VALUES (p_account, p_factor, session_user, v_channel, judged.now_step, p_code, pg_current_xact_id());
            RETURN true;
        END $$;

        -- A one-time code (RFC 6238) checked here, with the secret that never leaves the database: only a code
        -- this role reserved in a transaction committed before this one and not checked since, judged in the step
        -- it was reserved in, so checking it again (after a rollback) tells nothing new. Within the database's
        -- window (sealed.code_window), which the caller must name; a step at or before the last one accepted for
        -- this enrollment, or before it was made, is a used code. A match marks its step and gives the budget its
        -- count back. The step that matched, and the code's fingerprint as a wrong one; nothing when there is no
        -- such enrollment.
        CREATE FUNCTION keyway_check_code(p_account text, p_factor text, p_code text, p_window integer,
            p_remote boolean) RETURNS TABLE (step bigint, fingerprint bytea)
            LANGUAGE plpgsql SECURITY DEFINER SET search_path = @schema, pg_temp AS $$
        DECLARE
            judged record;
            booked code_reservations%ROWTYPE;
            digits integer;
            key bytea;
            used bigint;
            candidate bigint;
            mac bytea;
            place integer;
            binary_code bigint;
            matched bigint;
        BEGIN
            SELECT * INTO judged FROM keyway_code_record(p_account, p_factor);
            IF judged.record IS NULL THEN RETURN; END IF;
            IF p_window IS DISTINCT FROM judged.code_window THEN
                RAISE EXCEPTION 'this database checks codes of % within % steps either side, not %: set [totp] '
                    'window = % in keyway.conf', p_factor, judged.code_window, p_window, judged.code_window
                    USING ERRCODE = '22023';
            END IF;
            SELECT * INTO booked FROM code_reservations c
            WHERE c.account = p_account AND c.factor = p_factor AND c.role = session_user
                AND c.channel = CASE WHEN p_remote THEN 'remote' ELSE 'local' END AND c.code = p_code
                AND NOT c.checked AND c.made_in <> pg_current_xact_id() AND c.step >= judged.now_step - 1
            ORDER BY c.step DESC, c.id DESC LIMIT 1 FOR UPDATE;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'no check of this code of % of % was reserved and committed before this '
                    'transaction (keyway_reserve_code)', p_factor, p_account USING ERRCODE = '42501';
            END IF;
            digits := get_byte(judged.record, 1);
            key := substring(judged.record FROM judged.header + 1);
            SELECT CASE WHEN m.changed_at = judged.changed_at THEN m.step END INTO used FROM code_marks m
            WHERE m.account = p_account AND m.factor = p_factor;
            used := greatest(used, floor(judged.changed_at / 1000.0 / get_byte(judged.record, 2))::bigint);
            FOR candidate IN booked.step - judged.code_window .. booked.step + judged.code_window LOOP
                mac := hmac(int8send(candidate::bigint), key, 'sha1');
                place := get_byte(mac, 19) & 15;
                -- (PostgreSQL gives & << | one precedence, left to right: each term is bracketed.)
                binary_code := ((get_byte(mac, place) & 127)::bigint << 24) | (get_byte(mac, place + 1)::bigint << 16)
                    | (get_byte(mac, place + 2)::bigint << 8) | get_byte(mac, place + 3)::bigint;
                IF matched IS NULL AND candidate > used
                    AND lpad((binary_code % (10 ^ digits)::bigint)::text, digits, '0') = p_code
                THEN
                    matched := candidate;
                END IF;
            END LOOP;
            UPDATE code_reservations SET checked = true WHERE id = booked.id;
            IF matched IS NOT NULL THEN
                INSERT INTO code_marks VALUES (p_account, p_factor, matched, judged.changed_at)
                ON CONFLICT (account, factor) DO UPDATE SET step = excluded.step, changed_at = excluded.changed_at;
                UPDATE code_budgets b SET spent = b.spent - 1
                WHERE b.account = p_account AND b.factor = p_factor AND b.role = booked.role
                    AND b.channel = booked.channel AND b.step = booked.step AND b.spent > 0;
            END IF;
            RETURN QUERY SELECT matched, substring(hmac(convert_to('mismatch', 'UTF8') || int8send(booked.step)
                || convert_to(p_code, 'UTF8'), key, 'sha1') FROM 1 FOR 16);
        END $$;

        -- Grants follow the function they replace: every role that could check a code can reserve and check one.
        \(DatabaseSchema.grants(
            following: "keyway_check_code",
            of: "keyway_reserve_code(text, text, text, boolean), keyway_check_code(text, text, text, integer, boolean)"))
        DROP FUNCTION keyway_check_code(text, text, text, integer);
        DROP TABLE code_checks;

        REVOKE ALL ON FUNCTION keyway_code_record(text, text), keyway_reserve_code(text, text, text, boolean),
            keyway_check_code(text, text, text, integer, boolean) FROM PUBLIC;
        """
    }
}
