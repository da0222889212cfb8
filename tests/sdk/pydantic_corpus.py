"""JSON Schemas of common pydantic models, as pydantic itself writes them (v1 `.schema()`, v2
`.model_json_schema()`), for the schema corpus test (schema_corpus_test.cjs). Prints
{"pydantic": version, "schemas": [{"name", "schema"}]}. Runs under pydantic 1.10 (Debian's python3-pydantic, at test time)
and pydantic 2 (whose output is committed as fixtures/pydantic_v2_schemas.json, since Debian has
no pydantic 2). EmailStr needs the email-validator package: included when it imports."""
import datetime
import decimal
import enum
import ipaddress
import json
import sys
import uuid
from typing import Dict, List, Literal, Optional, Set, Tuple, Union

import pydantic
from pydantic import BaseModel, Field, HttpUrl, SecretStr, conint, confloat, conlist, constr

V2 = pydantic.VERSION.startswith("2")

try:
    import email_validator  # noqa: F401
    from pydantic import EmailStr
except ImportError:
    EmailStr = None


def pattern_str(p, **kw):
    return constr(pattern=p, **kw) if V2 else constr(regex=p, **kw)


def items_list(t, lo, hi):
    return conlist(t, min_length=lo, max_length=hi) if V2 else conlist(t, min_items=lo, max_items=hi)


class Color(str, enum.Enum):
    red = "red"
    green = "green"
    blue = "blue"


class Address(BaseModel):
    street: constr(min_length=1, max_length=80)
    city: str
    zip_code: pattern_str(r"^\d{5}$")
    country: Literal["US", "CA", "MX"] = "US"


class User(BaseModel):
    id: uuid.UUID
    name: constr(min_length=1, max_length=40)
    age: conint(ge=0, le=130)
    website: Optional[HttpUrl] = None
    created_at: datetime.datetime
    birthday: datetime.date
    tags: items_list(str, 0, 5) = []
    score: confloat(ge=0, le=1) = 0.5
    address: Address


class Item(BaseModel):
    sku: pattern_str(r"^[A-Z]{3}-\d{4}$")
    quantity: conint(gt=0, le=100)
    unit_price: confloat(gt=0, multiple_of=0.5)
    color: Color = Color.red
    finishes: Set[Color] = set()


class Order(BaseModel):
    order_id: conint(gt=0)
    items: items_list(Item, 1, 4)
    status: Literal["pending", "paid", "shipped"]
    notes: Optional[str] = None
    discount: conint(multiple_of=5, ge=0, le=50) = 0


class Event(BaseModel):
    title: str
    starts: datetime.datetime
    at: datetime.time
    day: datetime.date
    duration: datetime.timedelta
    host: ipaddress.IPv4Address
    backup_host: Optional[ipaddress.IPv6Address] = None


class Node(BaseModel):
    value: int
    children: List["Node"] = []


if V2:
    Node.model_rebuild()
else:
    Node.update_forward_refs()


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: conint(ge=1, le=9)


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Pet(BaseModel):
    pet: Union[Cat, Dog] = Field(..., discriminator="kind")
    owner: str


class Inventory(BaseModel):
    counts: Dict[str, conint(ge=0)]
    location: Tuple[float, float]
    labels: Optional[Dict[str, str]] = None


class Measurement(BaseModel):
    sensor: constr(min_length=3, max_length=12)
    celsius: confloat(ge=-273.15, le=1000)
    humidity: confloat(ge=0, lt=100)
    samples: items_list(confloat(ge=0, le=10), 1, 3)
    ok: bool


class Account(BaseModel):
    username: pattern_str(r"^[a-z][a-z0-9_]{2,15}$")
    password: SecretStr
    balance: decimal.Decimal
    roles: List[Literal["admin", "user", "guest"]]


class Weather(BaseModel):
    city: str
    unit: Literal["celsius", "fahrenheit"]
    days: conint(ge=1, le=7) = 1


models = [User, Order, Event, Node, Pet, Inventory, Measurement, Account, Weather, Address]

if EmailStr is not None:

    class Contact(BaseModel):
        name: str
        email: EmailStr
        phone: Optional[pattern_str(r"^\+?[0-9]{7,12}$")] = None

    models.append(Contact)


def schema_of(m):
    return m.model_json_schema() if V2 else m.schema()


out = {"pydantic": pydantic.VERSION, "schemas": [{"name": m.__name__, "schema": schema_of(m)}
                                                  for m in models]}
json.dump(out, sys.stdout, indent=1)
sys.stdout.write("\n")
