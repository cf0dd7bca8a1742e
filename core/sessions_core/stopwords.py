"""Stop words (pure data): the words of a language that carry no meaning in a query.

Folded as :func:`sessions_core.fts.fold` folds (lower case, no accents, contractions without
their apostrophe). Ranked search drops a query's stop words of the query's own language: the
language whose stop words the query uses most, English on a tie (``ranking.meaningful_units``).
"""

from __future__ import annotations

ENGLISH = frozenset(
    """
a about above after again against ago all also am an and any anything are arent around as at be
because been before being below between both but by can cant could couldnt did didnt do does
doesnt doing done dont down during each either else ever every few for from further get gets
getting got had hadnt has hasnt have havent having he hed hell her here heres hers herself hes
him himself his how hows however i id if ill im in into is isnt it its itself ive just let lets
like made make many may me might more most much must mustnt my myself neither no nor not now of
off often on once one only or other ought our ours ourselves out over own please quite rather
really said same say says shall shant she shed shell shes should shouldnt so some something such
tell than that thats the their theirs them themselves then there theres these they theyd theyll
theyre theyve thing things this those though through thus to too under until up upon us use used
very via want was wasnt way we wed well went were werent weve what whats when whens where wheres
whether which while who whom whos whose why whys will with within without wont would wouldnt yes
yet you youd youll your youre yours yourself yourselves youve
""".split()
)

FRENCH = frozenset(
    """
a ai aie aient aies ait alors as au aucun aura aurai auraient aurais aurait aux avaient avais
avait avec avez aviez avions avoir avons ayant ce ceci cela celle celles celui ces cet cette ceux
chaque comme comment dans de des donc dont du elle elles en es est et etaient etais etait etant
ete etes etions etre eu eux fait faut fut il ils je la le les leur leurs lui ma mais me meme mes
moi mon ne ni nos notre nous on ont ou par pas pour pourquoi qu quand que quel quelle quelles
quels qui quoi sa sans se sera ses si son sont sur ta te tes toi ton tous tout toute toutes tu un
une vos votre vous y
""".split()
)

GERMAN = frozenset(
    """
aber alle allem allen aller alles als also am an ander andere anderen auch auf aus bei bin bis
bist da damit dann das dass dem den denn der des dich die dies diese diesem diesen dieser dieses
dir doch dort du durch ein eine einem einen einer eines er es etwas euch euer eure fur hab habe
haben hat hatte hatten hier hin ich ihm ihn ihnen ihr ihre im in ist ja jede jedem jeden jeder
jedes jetzt kann kein keine man mein meine mich mir mit muss nach nicht nichts noch nun nur ob
oder ohne sehr sein seine sich sie sind so soll sondern uber um und uns unser unter vom von vor
war waren warum was weil welche welcher wenn wer werde werden wie wieder wir wird wo zu zum zur
""".split()
)

SPANISH = frozenset(
    """
a al algo algunos ante antes como con contra cual cuando de del desde donde durante e el ella
ellas ellos en entre era eran es esa esas ese eso esos esta estaba estado estan estar este esto
estos fue fueron ha habia han hay la las le les lo los mas me mi mis mucho muy nada ni no nos
nosotros o os otra otro para pero poco por porque que quien se sea ser si sin sobre son su sus
tambien te tiene tienen todo todos tu tus un una uno unos y ya yo
""".split()
)

ITALIAN = frozenset(
    """
a ad al alla alle agli ai anche avere aveva c che chi ci come con cosa cui da dal dalla dei del
della delle di dove e ed era essere gli ha hai hanno ho i il in io la le lei li lo loro lui ma
mi mia mio ne nei nel nella noi non o per perche piu quale quando quello questa questo se si
sono su sua sue suo sul sulla ti tra tu tutti tutto un una uno voi
""".split()
)

PORTUGUESE = frozenset(
    """
a ao aos as com como da das de dela dele do dos e ela elas ele eles em entre era esta este eu
foi for ha isso isto ja la mais mas me meu minha muito na nao nas nem no nos o os ou para pela
pelo por qual quando que quem se sem seu sua sao ser so tambem te tem tu um uma voce
""".split()
)

DUTCH = frozenset(
    """
aan al als bij dan dat de der deze die dit doch doen door dus een en er ge geen had heb hebben
heeft het hier hij hoe hun iets ik in is ja je kan kon maar me meer men met mij mijn na naar
niet niets nog nu of om omdat ons ook op over te tot u uit van veel voor waar wat was wel werd
wie wij wil worden zal ze zei zelf zich zij zijn zo zou
""".split()
)

LANGUAGES: dict[str, frozenset[str]] = {
    "english": ENGLISH,
    "french": FRENCH,
    "german": GERMAN,
    "spanish": SPANISH,
    "italian": ITALIAN,
    "portuguese": PORTUGUESE,
    "dutch": DUTCH,
}
"""Stop words by language; the first one wins a tie."""
