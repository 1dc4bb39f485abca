"""Question families for real sample banks: prompts, gold answers and answer canonicalisation.

The questions and gold answers are our own. Families with different answer distributions let
us train a stopping policy on some and evaluate it on one never seen:

- ``antonyms``: one word; wrong answers scatter over many strings, the right one stays most
  common (voting roughly doubles SmolLM2-135M's accuracy); failure mode: the word echoed back.
- ``countries``: the country of a city; fewer distinct answers, a strong single-sample rate.
- ``continents``: the continent of a country; few possible answers, wrong ones confident.
- ``capitals``: the capital of a country; many scattered wrong cities, voting helps a lot.

A sample is canonicalised (first line, lower case, punctuation stripped, aliases mapped to the
gold spelling) so that votes for the same answer are counted together; an empty answer is null.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# word -> gold antonym [, accepted alternatives...]
_ANTONYMS = """
hot cold|freezing
big small|little|tiny
fast slow
happy sad|unhappy
early late
open closed|close|shut
up down
day night
light dark|heavy
wet dry
full empty
rich poor
old young|new
long short
high low
strong weak
hard soft|easy
good bad|evil
clean dirty
love hate
begin end|finish
true false
win lose
thick thin
wide narrow
deep shallow
loud quiet|silent|soft
brave cowardly|afraid|scared|timid
cheap expensive|costly
push pull
above below|beneath|under
inside outside
before after
friend enemy|foe
buy sell
alive dead
laugh cry
question answer
sweet sour|bitter|salty
north south
east west
left right
first last
top bottom
arrive leave|depart
accept reject|refuse|decline
add subtract|remove
allow forbid|deny|prohibit|prevent
ancient modern
asleep awake
attack defend|defense|defence
beautiful ugly
bright dark|dim|dull
calm angry|agitated|stormy
careful careless
cause effect
certain uncertain|unsure
cheerful gloomy|sad
clever stupid|dumb|foolish
come go
complex simple
cool warm
correct incorrect|wrong
dangerous safe
difficult easy
entrance exit
even odd|uneven
expand contract|shrink
fail succeed|pass
famous unknown|obscure
fat thin|skinny|slim
fear courage|bravery
fill empty
float sink
forget remember
found lost
fresh stale|rotten
gentle rough|harsh
give take|receive
guilty innocent
happy sad
heavy light
hero villain|coward
honest dishonest
humble proud|arrogant
include exclude
increase decrease|reduce
interior exterior
join leave|separate
kind cruel|mean|unkind
large small|little|tiny
lazy hardworking|diligent|active|energetic
lend borrow
less more
major minor
male female
maximum minimum
mother father
near far|distant
never always
noisy quiet|silent
obey disobey
offer refuse|decline
often rarely|seldom
optimist pessimist
order chaos|disorder
patient impatient
peace war
permanent temporary
polite rude|impolite
positive negative
private public
profit loss
quick slow
raise lower
rapid slow
rare common
real fake|imaginary|unreal
remember forget
rough smooth
sad happy|glad
safe dangerous|unsafe
same different
sharp dull|blunt
shiny dull
sick healthy|well
single married|double|multiple
slow fast|quick
smart stupid|dumb
smooth rough
sober drunk
solid liquid|hollow
sour sweet
spend save|earn
stand sit
start finish|end|stop
stop go|start
straight crooked|curved|bent
success failure
summer winter
sunny cloudy|rainy
tall short
tame wild
teach learn
tight loose
tired energetic|rested|awake
together apart|separate|alone
tough tender|weak|soft|easy
transparent opaque
ugly beautiful|pretty
under over|above
unite divide|separate
upper lower
vacant occupied|full
victory defeat|loss
visible invisible
vertical horizontal
wise foolish|stupid
wrong right|correct
yes no
young old
asc desc
absent present
accurate inaccurate
active passive|inactive
adult child
advance retreat
agree disagree
alone together
amateur professional|expert
appear disappear|vanish
approve disapprove
awake asleep
backward forward
bless curse
bold shy|timid|meek
boring interesting|exciting
bottom top
broad narrow
build destroy|demolish
busy idle|free|lazy
captive free
ceiling floor
child adult|parent
city country|countryside|village
command obey|request
compulsory optional|voluntary
connect disconnect
construct destroy|demolish
crowded empty|deserted
cruel kind
dawn dusk
defeat victory|win
depart arrive
descend ascend|climb|rise
despair hope
divorce marriage|marry
domestic foreign|wild
dusk dawn
dwarf giant
eager reluctant|unwilling
encourage discourage
enter exit|leave
export import
external internal
failure success
false true
feeble strong|powerful
female male
fiction nonfiction|fact|reality
generous stingy|selfish|greedy
giant dwarf|tiny
host guest
hunger thirst|satiety|full
import export
inferior superior
input output
junior senior
knowledge ignorance
landlord tenant
lengthen shorten
liquid solid|gas
loose tight
majority minority
masculine feminine
maximum minimum
melt freeze|solidify
mercy cruelty
morning evening|night
natural artificial
negative positive
noon midnight
obedient disobedient
odd even
opaque transparent
past future|present
plural singular
predator prey
reward punishment|penalty
sunrise sunset
""".strip()

# city -> gold country [, accepted alternatives...]
_CITIES = """
paris|france
berlin|germany
madrid|spain
rome|italy
lisbon|portugal
vienna|austria
warsaw|poland
prague|czech republic|czechia
budapest|hungary
athens|greece
dublin|ireland
oslo|norway
stockholm|sweden
helsinki|finland
copenhagen|denmark
amsterdam|netherlands|holland|the netherlands
brussels|belgium
bern|switzerland
zurich|switzerland
geneva|switzerland
munich|germany
hamburg|germany
frankfurt|germany
cologne|germany
milan|italy
naples|italy
venice|italy
florence|italy
turin|italy
barcelona|spain
seville|spain
valencia|spain
porto|portugal
lyon|france
marseille|france
nice|france
bordeaux|france
toulouse|france
krakow|poland
gdansk|poland
bucharest|romania
sofia|bulgaria
belgrade|serbia
zagreb|croatia
ljubljana|slovenia
bratislava|slovakia
kyiv|ukraine
kiev|ukraine
odessa|ukraine
minsk|belarus
moscow|russia
saint petersburg|russia
vilnius|lithuania
riga|latvia
tallinn|estonia
reykjavik|iceland
london|united kingdom|uk|england|britain|great britain
manchester|united kingdom|uk|england|britain|great britain
liverpool|united kingdom|uk|england|britain|great britain
edinburgh|united kingdom|uk|scotland|britain|great britain
glasgow|united kingdom|uk|scotland|britain|great britain
cardiff|united kingdom|uk|wales|britain|great britain
belfast|united kingdom|uk|northern ireland|britain
istanbul|turkey|turkiye
ankara|turkey|turkiye
tokyo|japan
osaka|japan
kyoto|japan
yokohama|japan
seoul|south korea|korea
busan|south korea|korea
pyongyang|north korea
beijing|china
shanghai|china
guangzhou|china
shenzhen|china
chengdu|china
wuhan|china
hong kong|china
taipei|taiwan
manila|philippines|the philippines
hanoi|vietnam
ho chi minh city|vietnam
bangkok|thailand
kuala lumpur|malaysia
singapore|singapore
jakarta|indonesia
bali|indonesia
mumbai|india
delhi|india
new delhi|india
bangalore|india
chennai|india
kolkata|india
hyderabad|india
karachi|pakistan
lahore|pakistan
islamabad|pakistan
dhaka|bangladesh
kathmandu|nepal
colombo|sri lanka
kabul|afghanistan
tehran|iran
baghdad|iraq
riyadh|saudi arabia
mecca|saudi arabia
jeddah|saudi arabia
dubai|united arab emirates|uae
abu dhabi|united arab emirates|uae
doha|qatar
kuwait city|kuwait
muscat|oman
amman|jordan
beirut|lebanon
damascus|syria
jerusalem|israel
tel aviv|israel
cairo|egypt
alexandria|egypt
casablanca|morocco
marrakech|morocco
rabat|morocco
tunis|tunisia
algiers|algeria
tripoli|libya
lagos|nigeria
abuja|nigeria
accra|ghana
dakar|senegal
nairobi|kenya
mombasa|kenya
addis ababa|ethiopia
kampala|uganda
kigali|rwanda
dar es salaam|tanzania
kinshasa|democratic republic of the congo|congo|drc
luanda|angola
harare|zimbabwe
lusaka|zambia
johannesburg|south africa
cape town|south africa
durban|south africa
pretoria|south africa
new york|united states|usa|us|united states of america|america
los angeles|united states|usa|us|united states of america|america
chicago|united states|usa|us|united states of america|america
houston|united states|usa|us|united states of america|america
miami|united states|usa|us|united states of america|america
boston|united states|usa|us|united states of america|america
seattle|united states|usa|us|united states of america|america
san francisco|united states|usa|us|united states of america|america
washington|united states|usa|us|united states of america|america
atlanta|united states|usa|us|united states of america|america
denver|united states|usa|us|united states of america|america
dallas|united states|usa|us|united states of america|america
las vegas|united states|usa|us|united states of america|america
philadelphia|united states|usa|us|united states of america|america
detroit|united states|usa|us|united states of america|america
new orleans|united states|usa|us|united states of america|america
honolulu|united states|usa|us|united states of america|america
toronto|canada
montreal|canada
vancouver|canada
ottawa|canada
calgary|canada
quebec city|canada
mexico city|mexico
guadalajara|mexico
cancun|mexico
monterrey|mexico
havana|cuba
kingston|jamaica
panama city|panama
san jose|costa rica
guatemala city|guatemala
bogota|colombia
medellin|colombia
caracas|venezuela
quito|ecuador
lima|peru
cusco|peru
la paz|bolivia
santiago|chile
buenos aires|argentina
cordoba|argentina
montevideo|uruguay
asuncion|paraguay
sao paulo|brazil
rio de janeiro|brazil
brasilia|brazil
salvador|brazil
sydney|australia
melbourne|australia
brisbane|australia
perth|australia
adelaide|australia
canberra|australia
auckland|new zealand
wellington|new zealand
christchurch|new zealand
suva|fiji
ulaanbaatar|mongolia
almaty|kazakhstan
astana|kazakhstan
tashkent|uzbekistan
baku|azerbaijan
tbilisi|georgia
yerevan|armenia
nicosia|cyprus
valletta|malta
monaco|monaco
luxembourg|luxembourg
salzburg|austria
antwerp|belgium
rotterdam|netherlands|holland|the netherlands
gothenburg|sweden
bergen|norway
""".strip()


# continent gold [|accepted alternatives...] -> its countries (spaces as "_"); countries that span two
# continents are left out, and so are the three countries of the example turns
_AFRICA = "africa|north africa|west africa|east africa|central africa|southern africa|sub-saharan africa"
_ASIA = "asia|east asia|south asia|southeast asia|central asia|western asia|middle east"
_EUROPE = "europe|western europe|eastern europe|northern europe|southern europe|central europe"
_CONTINENTS = {
    _EUROPE: """albania andorra austria belarus belgium bosnia_and_herzegovina bulgaria croatia
        czech_republic denmark estonia finland france germany greece hungary iceland ireland italy
        latvia liechtenstein lithuania luxembourg malta moldova monaco montenegro netherlands
        north_macedonia norway poland portugal romania san_marino serbia slovakia slovenia spain
        sweden switzerland ukraine united_kingdom""",
    _ASIA: """afghanistan bahrain bangladesh bhutan brunei cambodia china india indonesia iran iraq
        israel jordan kuwait kyrgyzstan laos lebanon malaysia maldives mongolia myanmar nepal
        north_korea oman pakistan philippines qatar saudi_arabia singapore south_korea sri_lanka
        syria taiwan tajikistan thailand turkmenistan united_arab_emirates uzbekistan vietnam yemen""",
    _AFRICA: """algeria angola benin botswana burkina_faso burundi cameroon cape_verde
        central_african_republic chad comoros djibouti egypt equatorial_guinea eritrea eswatini
        ethiopia gabon gambia guinea guinea-bissau ivory_coast kenya lesotho liberia libya
        madagascar malawi mali mauritania mauritius morocco mozambique namibia niger nigeria rwanda
        senegal seychelles sierra_leone somalia south_africa south_sudan sudan tanzania togo tunisia
        uganda zambia zimbabwe""",
    "north america|central america|caribbean": """canada united_states mexico guatemala belize
        honduras el_salvador nicaragua costa_rica panama cuba jamaica haiti dominican_republic
        bahamas barbados trinidad_and_tobago grenada saint_lucia dominica""",
    "south america|latin america": """brazil argentina chile colombia venezuela ecuador bolivia
        paraguay uruguay guyana suriname""",
    "oceania|australia|australasia|pacific": """australia new_zealand fiji papua_new_guinea samoa tonga
        vanuatu solomon_islands kiribati micronesia palau tuvalu nauru marshall_islands""",
}

# country -> gold capital [, accepted alternatives...]; the example turns' countries are left out
_CAPITALS = """
albania|tirana|tirane
andorra|andorra la vella
austria|vienna|wien
belarus|minsk
belgium|brussels|bruxelles
bosnia and herzegovina|sarajevo
bulgaria|sofia
croatia|zagreb
czech republic|prague|praha
denmark|copenhagen
estonia|tallinn
finland|helsinki
france|paris
germany|berlin
greece|athens
hungary|budapest
iceland|reykjavik|reykjavík
ireland|dublin
latvia|riga
liechtenstein|vaduz
lithuania|vilnius
luxembourg|luxembourg|luxembourg city
malta|valletta
moldova|chisinau|chișinău|chişinău
montenegro|podgorica
netherlands|amsterdam
north macedonia|skopje
norway|oslo
poland|warsaw|warszawa
portugal|lisbon|lisboa
romania|bucharest
russia|moscow
serbia|belgrade
slovakia|bratislava
slovenia|ljubljana
spain|madrid
sweden|stockholm
switzerland|bern|berne
ukraine|kyiv|kiev
united kingdom|london
afghanistan|kabul
armenia|yerevan
azerbaijan|baku
bahrain|manama
bangladesh|dhaka|dacca
bhutan|thimphu
cambodia|phnom penh
china|beijing|peking
cyprus|nicosia
georgia|tbilisi
india|new delhi|delhi
indonesia|jakarta
iran|tehran|teheran
iraq|baghdad
japan|tokyo
jordan|amman
kazakhstan|astana|nur-sultan
kuwait|kuwait city|kuwait
kyrgyzstan|bishkek
laos|vientiane
lebanon|beirut
malaysia|kuala lumpur|putrajaya
maldives|male|malé
mongolia|ulaanbaatar|ulan bator
myanmar|naypyidaw|nay pyi taw|naypyitaw
nepal|kathmandu
north korea|pyongyang
oman|muscat
pakistan|islamabad
philippines|manila
qatar|doha
saudi arabia|riyadh
singapore|singapore
south korea|seoul
sri lanka|sri jayawardenepura kotte|kotte|colombo
syria|damascus
taiwan|taipei
tajikistan|dushanbe
thailand|bangkok
turkey|ankara
turkmenistan|ashgabat
united arab emirates|abu dhabi
uzbekistan|tashkent
vietnam|hanoi
yemen|sanaa|sana'a
algeria|algiers
angola|luanda
benin|porto-novo|porto novo
botswana|gaborone
burkina faso|ouagadougou
burundi|gitega
cameroon|yaounde|yaoundé
cape verde|praia
central african republic|bangui
chad|n'djamena|ndjamena
comoros|moroni
djibouti|djibouti
egypt|cairo
equatorial guinea|malabo
eritrea|asmara
ethiopia|addis ababa
gabon|libreville
gambia|banjul
ghana|accra
guinea|conakry
lesotho|maseru
liberia|monrovia
libya|tripoli
madagascar|antananarivo
malawi|lilongwe
mali|bamako
mauritania|nouakchott
mauritius|port louis
morocco|rabat
mozambique|maputo
namibia|windhoek
niger|niamey
nigeria|abuja
rwanda|kigali
senegal|dakar
seychelles|victoria
sierra leone|freetown
somalia|mogadishu
south africa|pretoria|cape town|bloemfontein
south sudan|juba
sudan|khartoum
tanzania|dodoma
togo|lome|lomé
tunisia|tunis
uganda|kampala
zambia|lusaka
zimbabwe|harare
argentina|buenos aires
bahamas|nassau
barbados|bridgetown
belize|belmopan
bolivia|sucre|la paz
brazil|brasilia|brasília
canada|ottawa
chile|santiago|santiago de chile
colombia|bogota|bogotá
costa rica|san jose|san josé
cuba|havana|la habana
dominican republic|santo domingo
ecuador|quito
el salvador|san salvador
guatemala|guatemala city|guatemala
guyana|georgetown
haiti|port-au-prince|port au prince
honduras|tegucigalpa
jamaica|kingston
mexico|mexico city|ciudad de mexico|ciudad de méxico
nicaragua|managua
panama|panama city|panama
paraguay|asuncion|asunción
suriname|paramaribo
trinidad and tobago|port of spain
united states|washington|washington d c|washington dc
uruguay|montevideo
venezuela|caracas
australia|canberra
fiji|suva
new zealand|wellington
papua new guinea|port moresby
samoa|apia
solomon islands|honiara
tonga|nuku'alofa|nukualofa
vanuatu|port vila
grenada|st george's|saint george's|st georges
saint lucia|castries
dominica|roseau
antigua and barbuda|st john's|saint john's|st johns
saint kitts and nevis|basseterre
saint vincent and the grenadines|kingstown
kiribati|tarawa|south tarawa
micronesia|palikir
palau|ngerulmud
tuvalu|funafuti
marshall islands|majuro
brunei|bandar seri begawan
east timor|dili
eswatini|mbabane|lobamba
guinea-bissau|bissau
republic of the congo|brazzaville
democratic republic of the congo|kinshasa
sao tome and principe|sao tome|são tomé
san marino|san marino
monaco|monaco
""".strip()

# country -> gold main language [, accepted alternatives...]; one word each (an answer is read as its
# first word); countries with several equally main languages (Belgium, Switzerland, ...) left out
_LANGUAGES = """
france|french
spain|spanish|castilian
italy|italian
portugal|portuguese
brazil|portuguese
mexico|spanish
argentina|spanish
chile|spanish
colombia|spanish
venezuela|spanish
cuba|spanish
ecuador|spanish
bolivia|spanish|quechua|aymara
uruguay|spanish
paraguay|spanish|guarani
costa rica|spanish
guatemala|spanish
honduras|spanish
nicaragua|spanish
el salvador|spanish
panama|spanish
dominican republic|spanish
united states|english
united kingdom|english
australia|english
new zealand|english|maori
ireland|english|irish|gaelic
jamaica|english|patois
china|chinese|mandarin
taiwan|chinese|mandarin
south korea|korean
north korea|korean
vietnam|vietnamese
thailand|thai
laos|lao|laotian
cambodia|khmer|cambodian
myanmar|burmese|myanmar
indonesia|indonesian|bahasa
malaysia|malay|malaysian|bahasa
philippines|filipino|tagalog|english
india|hindi|english
pakistan|urdu|english
bangladesh|bengali|bangla
nepal|nepali
sri lanka|sinhala|sinhalese|tamil
afghanistan|pashto|dari|persian
iran|persian|farsi
iraq|arabic|kurdish
saudi arabia|arabic
syria|arabic
jordan|arabic
lebanon|arabic
egypt|arabic
morocco|arabic|berber|amazigh
algeria|arabic|berber|amazigh
tunisia|arabic
libya|arabic
sudan|arabic
yemen|arabic
oman|arabic
kuwait|arabic
qatar|arabic
bahrain|arabic
united arab emirates|arabic
israel|hebrew
turkey|turkish
greece|greek
cyprus|greek|turkish
russia|russian
ukraine|ukrainian
belarus|belarusian|russian
poland|polish
czech republic|czech
slovakia|slovak
hungary|hungarian|magyar
romania|romanian
moldova|romanian|moldovan
bulgaria|bulgarian
serbia|serbian
croatia|croatian
slovenia|slovenian|slovene
bosnia and herzegovina|bosnian|serbian|croatian
montenegro|montenegrin|serbian
albania|albanian
north macedonia|macedonian
netherlands|dutch
austria|german
liechtenstein|german
denmark|danish
norway|norwegian
sweden|swedish
finland|finnish|swedish
iceland|icelandic
estonia|estonian
latvia|latvian
lithuania|lithuanian
georgia|georgian
armenia|armenian
azerbaijan|azerbaijani|azeri
kazakhstan|kazakh|russian
uzbekistan|uzbek
turkmenistan|turkmen
kyrgyzstan|kyrgyz|russian
tajikistan|tajik
mongolia|mongolian
ethiopia|amharic
somalia|somali|arabic
kenya|swahili|english
tanzania|swahili|english
uganda|english|swahili
rwanda|kinyarwanda|french|english
burundi|kirundi|french
madagascar|malagasy|french
senegal|french|wolof
mali|french|bambara
ivory coast|french
niger|french|hausa
chad|french|arabic
cameroon|french|english
gabon|french
togo|french
benin|french
guinea|french
burkina faso|french
democratic republic of the congo|french|lingala|swahili
angola|portuguese
mozambique|portuguese
guinea-bissau|portuguese
cape verde|portuguese|creole
nigeria|english|hausa|yoruba|igbo
ghana|english
liberia|english
sierra leone|english|krio
gambia|english
zimbabwe|english|shona
zambia|english
malawi|english|chichewa
botswana|english|setswana|tswana
namibia|english
south africa|english|zulu|afrikaans|xhosa
eswatini|swazi|siswati|english
lesotho|sesotho|sotho|english
haiti|french|haitian|creole
malta|maltese|english
san marino|italian
monaco|french
andorra|catalan
vatican city|italian|latin
brunei|malay
bhutan|dzongkha
maldives|dhivehi|divehi
tonga|tongan|english
samoa|samoan|english
fiji|english|fijian
mauritius|english|french|creole
seychelles|creole|english|french
belize|english
guyana|english
suriname|dutch
trinidad and tobago|english
bahamas|english
barbados|english
""".strip()

# noun -> gold plural [, accepted alternatives...]: regular, -es, -ies, -ves, irregular, Latin and
# Greek, unchanged (the example turns' nouns, car, man and story, are not asked)
_PLURALS = """
cat cats
dog dogs
book books
tree trees
house houses
bird birds
apple apples
chair chairs
table tables
river rivers
box boxes
bus buses|busses
church churches
dish dishes
watch watches
fox foxes
glass glasses
brush brushes
kiss kisses
match matches
tax taxes
bench benches
dress dresses
wish wishes
lunch lunches
city cities
baby babies
lady ladies
party parties
country countries
family families
puppy puppies
berry berries
fly flies
spy spies
army armies
cherry cherries
day days
boy boys
key keys
toy toys
monkey monkeys
valley valleys
leaf leaves
knife knives
wife wives
wolf wolves
half halves
shelf shelves
loaf loaves
thief thieves
calf calves
life lives
elf elves
scarf scarves|scarfs
roof roofs
chief chiefs
cliff cliffs
belief beliefs
chef chefs
woman women
child children
tooth teeth
foot feet
mouse mice
goose geese
person people|persons
ox oxen
louse lice
sheep sheep
deer deer
fish fish|fishes
moose moose
series series
species species
aircraft aircraft
salmon salmon|salmons
trout trout|trouts
potato potatoes
tomato tomatoes
hero heroes
echo echoes
veto vetoes
piano pianos
photo photos
radio radios
zoo zoos
video videos
kangaroo kangaroos
cactus cacti|cactuses
fungus fungi|funguses
nucleus nuclei
radius radii|radiuses
stimulus stimuli
alumnus alumni
syllabus syllabi|syllabuses
analysis analyses
crisis crises
thesis theses
basis bases
oasis oases
diagnosis diagnoses
hypothesis hypotheses
phenomenon phenomena
criterion criteria
datum data
bacterium bacteria
curriculum curricula|curriculums
medium media|mediums
memorandum memoranda|memorandums
appendix appendices|appendixes
index indices|indexes
matrix matrices|matrixes
vertex vertices|vertexes
axis axes
larva larvae
antenna antennae|antennas
formula formulae|formulas
vertebra vertebrae
die dice
penny pennies|pence
quiz quizzes
genius geniuses
virus viruses
bonus bonuses
campus campuses
circus circuses
octopus octopuses|octopi
platypus platypuses
chateau chateaux|chateaus
tableau tableaux|tableaus
passerby passersby
pen pens
cup cups
door doors
window windows
phone phones
lamp lamps
road roads
ship ships
star stars
cloud clouds
mountain mountains
flower flowers
horse horses
cow cows
pig pigs
duck ducks
frog frogs
snake snakes
lion lions
tiger tigers
bear bears
rabbit rabbits
girl girls
friend friends
teacher teachers
student students
doctor doctors
farmer farmers
king kings
queen queens
egg eggs
banana bananas
orange oranges
carrot carrots
onion onions
cake cakes
cookie cookies
pizza pizzas
sandwich sandwiches
peach peaches
beach beaches
bush bushes
class classes
boss bosses
address addresses
princess princesses
witch witches
torch torches
inch inches
fax faxes
wax waxes
sky skies
body bodies
enemy enemies
library libraries
factory factories
battery batteries
lily lilies
pony ponies
butterfly butterflies
journey journeys
chimney chimneys
donkey donkeys
turkey turkeys
holiday holidays
wharf wharves|wharfs
hoof hooves|hoofs
dwarf dwarfs|dwarves
proof proofs
safe safes
giraffe giraffes
sheriff sheriffs
brother brothers|brethren
cherub cherubs|cherubim
ellipsis ellipses
"""

# adjective -> gold comparative [, accepted alternatives...]; only one-word comparatives (the
# example turns' adjectives, slow, funny and many, are not asked)
_COMPARATIVES = """
big bigger
small smaller
tall taller
short shorter
long longer
old older|elder
young younger
fast faster
quick quicker
hot hotter
cold colder
warm warmer
cool cooler
high higher
low lower
strong stronger
weak weaker
hard harder
soft softer
loud louder
quiet quieter
rich richer
poor poorer
cheap cheaper
clean cleaner
dark darker
light lighter
bright brighter
deep deeper
wide wider
thick thicker
thin thinner
fat fatter
sad sadder
wet wetter
dry drier|dryer
large larger
great greater
nice nicer
late later
safe safer
wise wiser
brave braver
close closer
rude ruder
fine finer
pure purer
ripe riper
rare rarer
strange stranger
simple simpler
gentle gentler
noble nobler
happy happier
easy easier
busy busier
heavy heavier
pretty prettier
ugly uglier
lazy lazier
angry angrier
hungry hungrier
dirty dirtier
early earlier
healthy healthier
lucky luckier
silly sillier
tiny tinier
noisy noisier
crazy crazier
tidy tidier
messy messier
friendly friendlier
lovely lovelier
lonely lonelier
sunny sunnier
windy windier
rainy rainier
cloudy cloudier
snowy snowier
sleepy sleepier
scary scarier
juicy juicier
tasty tastier
spicy spicier
salty saltier
shiny shinier
dusty dustier
good better
bad worse
far farther|further
little less|littler|smaller
much more
well better
ill worse
fit fitter
slim slimmer
dim dimmer
grim grimmer
flat flatter
mad madder
red redder
sharp sharper
smart smarter
kind kinder
neat neater
calm calmer
fair fairer
mild milder
wild wilder
cruel crueler|crueller
clever cleverer
narrow narrower
shallow shallower
proud prouder
fresh fresher
sweet sweeter
sour sourer
rough rougher
smooth smoother
tough tougher
loose looser
tight tighter
steep steeper
plain plainer
broad broader
green greener
blue bluer
black blacker
white whiter
near nearer
new newer
dull duller
bold bolder
cute cuter
huge huger
lame lamer
tame tamer
vague vaguer
weird weirder
thirsty thirstier
chilly chillier
"""

_PUNCT = re.compile(r"[^\w\s'-]")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    gold: str
    aliases: tuple[str, ...]


@dataclass(frozen=True)
class Family:
    """A task family: its questions, how to ask, and how to read an answer."""

    name: str
    questions: tuple[Question, ...]
    shots: tuple[tuple[str, str], ...]
    canonical: Callable[[str, Question], str | None]
    max_new_tokens: int

    def messages(self, q: Question) -> list[dict[str, str]]:
        """Few-shot chat: three example turns, then the question."""
        msgs: list[dict[str, str]] = []
        for ask, ans in self.shots:
            msgs += [{"role": "user", "content": ask}, {"role": "assistant", "content": ans}]
        msgs.append({"role": "user", "content": q.question})
        return msgs


def _clean(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    line = _PUNCT.sub(" ", line.lower()).replace("_", " ")
    return _SPACE.sub(" ", line).strip(" '-")


def _canon_word(text: str, q: Question) -> str | None:
    """First word of the first line; an accepted synonym counts as the gold word."""
    words = _clean(text).split()
    if not words:
        return None
    w = words[0]
    return q.gold if w in q.aliases else w


def _canon_phrase(text: str, q: Question) -> str | None:
    """The first line (at most four words, without a leading 'the'); aliases map to gold."""
    s = _clean(text)
    for prefix in ("the ", "it is in ", "in "):
        if s.startswith(prefix):
            s = s[len(prefix) :]
    if not s:
        return None
    s = " ".join(s.split()[:4])
    if s in q.aliases:
        return q.gold
    return s


def _antonym_question(word: str) -> str:
    return f'What is the opposite of the word "{word}"? Answer with just one word.'


def _city_question(city: str) -> str:
    return f"In which country is the city of {city.title()}? Answer with just the country name."


def _plural_question(word: str) -> str:
    return f'What is the plural of the word "{word}"? Answer with just one word.'


def _comparative_question(word: str) -> str:
    return f'What is the comparative form of the adjective "{word}"? Answer with just one word.'


def _parse_words(text: str, prefix: str, ask: Callable[[str], str]) -> tuple[Question, ...]:
    """``word gold|alternative...`` lines -> questions (the first line of a word wins)."""
    out: dict[str, Question] = {}
    for line in text.strip().splitlines():
        word, rest = line.split(" ", 1)
        answers = rest.split("|")
        if word not in out:
            out[word] = Question(f"{prefix}-{word}", ask(word), answers[0], tuple(answers))
    return tuple(out.values())


def _parse_cities() -> tuple[Question, ...]:
    out: dict[str, Question] = {}
    for line in _CITIES.splitlines():
        city, *answers = line.split("|")
        if city not in out:
            slug = city.replace(" ", "-")
            out[city] = Question(f"city-{slug}", _city_question(city), answers[0], tuple(answers))
    return tuple(out.values())


def _country_name(slug: str) -> str:
    """'bosnia_and_herzegovina' -> 'Bosnia and Herzegovina' (small words stay lower case)."""
    small = {"and", "of", "the"}
    return " ".join(w if w in small else w.title() for w in slug.split("_"))


def _continent_question(country: str) -> str:
    return f"On which continent is the country {_country_name(country)}? Answer with just the continent name."


def _parse_continents() -> tuple[Question, ...]:
    out: dict[str, Question] = {}
    for answers, countries in _CONTINENTS.items():
        for c in countries.split():
            out[c] = Question(
                f"cont-{c.replace('_', '-')}",
                _continent_question(c),
                answers.split("|")[0],
                tuple(answers.split("|")),
            )
    return tuple(out.values())


_WITH_THE = {
    "bahamas", "central_african_republic", "comoros", "czech_republic", "democratic_republic_of_the_congo",
    "dominican_republic", "gambia", "maldives", "marshall_islands", "netherlands", "philippines",
    "republic_of_the_congo", "seychelles", "solomon_islands", "united_arab_emirates", "united_kingdom",
    "united_states",
}  # fmt: skip


def _capital_question(country: str) -> str:
    name = ("the " if country in _WITH_THE else "") + _country_name(country)
    return f"What is the capital city of {name}? Answer with just the city name."


def _parse_capitals() -> tuple[Question, ...]:
    out: dict[str, Question] = {}
    for line in _CAPITALS.splitlines():
        country, *answers = line.split("|")
        slug = country.replace(" ", "_")
        out[slug] = Question(
            f"cap-{slug.replace('_', '-')}", _capital_question(slug), answers[0], tuple(answers)
        )
    return tuple(out.values())


def _language_question(country: str) -> str:
    name = ("the " if country in _WITH_THE else "") + _country_name(country)
    return f"What is the main language spoken in {name}? Answer with just the language name."


# a language named in its own tongue counts as that language
_ENDONYMS = {"french": "français", "spanish": "español", "portuguese": "português", "italian": "italiano"}


def _parse_languages() -> tuple[Question, ...]:
    out: dict[str, Question] = {}
    for line in _LANGUAGES.splitlines():
        country, *answers = line.split("|")
        answers += [_ENDONYMS[a] for a in answers if a in _ENDONYMS]
        slug = country.replace(" ", "_")
        out[slug] = Question(
            f"lang-{slug.replace('_', '-')}", _language_question(slug), answers[0], tuple(answers)
        )
    return tuple(out.values())


FAMILIES: dict[str, Family] = {
    "antonyms": Family(
        name="antonyms",
        questions=_parse_words(_ANTONYMS, "ant", _antonym_question),
        shots=(
            (_antonym_question("cold"), "hot"),
            (_antonym_question("tiny"), "huge"),
            (_antonym_question("mean"), "nice"),
        ),
        canonical=_canon_word,
        max_new_tokens=6,
    ),
    "countries": Family(
        name="countries",
        questions=_parse_cities(),
        shots=(
            (_city_question("nagoya"), "Japan"),
            (_city_question("graz"), "Austria"),
            (_city_question("recife"), "Brazil"),
        ),
        canonical=_canon_phrase,
        max_new_tokens=8,
    ),
    "continents": Family(
        name="continents",
        questions=_parse_continents(),
        shots=(
            (_continent_question("japan"), "Asia"),
            (_continent_question("peru"), "South America"),
            (_continent_question("ghana"), "Africa"),
        ),
        canonical=_canon_phrase,
        max_new_tokens=8,
    ),
    "capitals": Family(
        name="capitals",
        questions=_parse_capitals(),
        shots=(
            (_capital_question("italy"), "Rome"),
            (_capital_question("kenya"), "Nairobi"),
            (_capital_question("peru"), "Lima"),
        ),
        canonical=_canon_phrase,
        max_new_tokens=8,
    ),
    "languages": Family(
        name="languages",
        questions=_parse_languages(),
        shots=(
            (_language_question("germany"), "German"),
            (_language_question("japan"), "Japanese"),
            (_language_question("peru"), "Spanish"),
        ),
        canonical=_canon_word,
        max_new_tokens=6,
    ),
    "plurals": Family(
        name="plurals",
        questions=_parse_words(_PLURALS, "plur", _plural_question),
        shots=(
            (_plural_question("car"), "cars"),
            (_plural_question("man"), "men"),
            (_plural_question("story"), "stories"),
        ),
        canonical=_canon_word,
        max_new_tokens=6,
    ),
    "comparatives": Family(
        name="comparatives",
        questions=_parse_words(_COMPARATIVES, "comp", _comparative_question),
        shots=(
            (_comparative_question("slow"), "slower"),
            (_comparative_question("funny"), "funnier"),
            (_comparative_question("many"), "more"),
        ),
        canonical=_canon_word,
        max_new_tokens=6,
    ),
}


def family(name: str) -> Family:
    from ...core.errors import OrchestraceError

    if name not in FAMILIES:
        raise OrchestraceError("OT613", f"unknown task family {name!r}; known: {', '.join(FAMILIES)}")
    return FAMILIES[name]
