"""The SQLAlchemy dialect sqlite+pleroma://, and pandas, twin against
SQLAlchemy's own sqlite:// (the sqlite3 module)."""

import pandas as pd
import pytest
from sqlalchemy import Column, ForeignKey, Integer, String, create_engine, inspect, select, text
from sqlalchemy.orm import Session, declarative_base, relationship

import pleroma

Base = declarative_base()


class Country(Base):
    __tablename__ = "countries"
    code = Column(String, primary_key=True)
    region = Column(String)
    events = relationship("Event", back_populates="country")


class Event(Base):
    __tablename__ = "events"
    id = Column(Integer, primary_key=True)
    country_code = Column(String, ForeignKey("countries.code"))
    cents = Column(Integer)
    country = relationship("Country", back_populates="events")


def _session_work(engine):
    Base.metadata.create_all(engine)
    out = []
    with Session(engine) as s:
        s.add_all([Country(code="DE", region="EU"), Country(code="US", region="NA")])
        s.add_all([Event(country_code="DE", cents=5), Event(country_code="US", cents=7),
                   Event(country_code="DE", cents=1)])
        s.commit()
        out.append([(e.id, e.country.region, e.cents) for e in s.scalars(select(Event).order_by(Event.id))])
        ev = s.get(Event, 2)
        ev.cents = 70
        s.delete(s.get(Event, 1))
        s.flush()
        s.rollback()
        out.append([(e.id, e.cents) for e in s.scalars(select(Event).order_by(Event.id))])
        s.get(Event, 3).cents = 10
        s.commit()
        out.append(s.execute(text("SELECT country_code, SUM(cents) FROM events GROUP BY 1 ORDER BY 1")).all())
        out.append(s.scalars(select(Country.code).where(Country.code.regexp_match("^D"))).all())
    return out


def test_session_reflection_and_pandas(tmp_path):
    plain = create_engine(f"sqlite:///{tmp_path / 'plain.db'}")
    ours = create_engine(f"sqlite+pleroma:///{tmp_path / 'ours.db'}")
    assert ours.dialect.driver == "pleroma"
    assert _session_work(plain) == _session_work(ours)

    for e in (plain, ours):
        insp = inspect(e)
        assert insp.get_table_names() == ["countries", "events"]
    assert [c["name"] for c in inspect(plain).get_columns("events")] == \
        [c["name"] for c in inspect(ours).get_columns("events")]
    assert inspect(plain).get_foreign_keys("events") == inspect(ours).get_foreign_keys("events")

    df = pd.DataFrame({"country": ["DE", "FR", "DE", None], "day": [1, 2, 1, 3],
                       "cents": [5, 7, 1, 9], "rate": [0.5, 1.5, None, 2.0]})
    for e in (plain, ours):
        df.to_sql("ev", e, index=False)
    with ours.connect() as c:
        c.execute(text("PRAGMA pleroma_attach('ev', 'country, day', 'cents')"))
        c.commit()
    for sql in ["SELECT * FROM ev",
                "SELECT country, SUM(cents) AS s, COUNT(*) AS n FROM ev GROUP BY country ORDER BY country",
                "SELECT day, MAX(cents) FROM ev WHERE day < 3 GROUP BY day"]:
        a, b = pd.read_sql(sql, plain), pd.read_sql(sql, ours)
        pd.testing.assert_frame_equal(a, b)

    # pandas over a raw pleroma connection, served by the plane.
    con = pleroma.connect(str(tmp_path / "ours.db"))
    with pytest.warns(UserWarning):  # pandas names only sqlite3's connection
        got = pd.read_sql("SELECT country, SUM(cents) AS s FROM ev GROUP BY country", con)
    assert con.last_route == "plane"
    want = pd.read_sql("SELECT country, SUM(cents) AS s FROM ev GROUP BY country", plain)
    pd.testing.assert_frame_equal(got, want)
    con.close()
